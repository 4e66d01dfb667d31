/* Output files written whole or not at all (autograd/outfile.h). */
#include "autograd/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool fail(char *err, size_t errlen, const char *path, const char *what, int e)
{
    if (err && errlen)
        snprintf(err, errlen, "%s: %s%s%s", path, what, e ? ": " : "", e ? strerror(e) : "");
    return false;
}

/* The file a symlink chain ends at (which may not exist yet), or a copy of path. */
static char *resolve_links(const char *path)
{
    char *cur = strdup(path);
    for (int hops = 0; cur && hops < 40; hops++) {
        char target[PATH_MAX];
        ssize_t n = readlink(cur, target, sizeof target - 1);
        if (n < 0)
            return cur;
        target[n] = '\0';
        char *next;
        const char *slash = strrchr(cur, '/');
        if (target[0] == '/' || !slash) {
            next = strdup(target);
        } else {
            size_t dir = (size_t)(slash - cur) + 1;
            next = malloc(dir + (size_t)n + 1);
            if (next) {
                memcpy(next, cur, dir);
                memcpy(next + dir, target, (size_t)n + 1);
            }
        }
        free(cur);
        cur = next;
    }
    return cur;
}

/* "DIR/.NAME.XXXXXX" for path "DIR/NAME" (or ".NAME.XXXXXX" in the working folder). */
static char *temp_template(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    size_t len = strlen(path) + 16;
    char *t = malloc(len);
    if (t)
        snprintf(t, len, "%.*s.%s.XXXXXX", (int)dir, path, path + dir);
    return t;
}

/* The temporary files open now, removed by an exit that comes before their commit or abort: a
 * program that ends on an error (cli_die after a failed --log row, a diverged loss) leaves no
 * ".NAME.XXXXXX" behind. Only the process that made them removes them (a forked child's exit
 * must not take its parent's files). */
enum { OPEN_MAX = 64 };
static char  *open_tmp[OPEN_MAX];
static pid_t  open_pid[OPEN_MAX];

static void remove_open_temps(void)
{
    for (int i = 0; i < OPEN_MAX; i++)
        if (open_tmp[i] && open_pid[i] == getpid())
            unlink(open_tmp[i]);
}

static void track(const char *tmp, bool add)
{
    static bool registered;
    if (add && !registered)
        registered = atexit(remove_open_temps) == 0;
    for (int i = 0; i < OPEN_MAX; i++) {
        if (add && !open_tmp[i]) {
            open_tmp[i] = strdup(tmp);      /* NULL when out of memory: then not tracked */
            open_pid[i] = getpid();
            return;
        }
        if (!add && open_tmp[i] && strcmp(open_tmp[i], tmp) == 0) {
            free(open_tmp[i]);
            open_tmp[i] = NULL;
            return;
        }
    }
}

bool outfile_open(OutFile *o, const char *path, char *err, size_t errlen)
{
    *o = (OutFile){ .fd = -1 };
    if (!path || !*path)
        return fail(err, errlen, "(empty path)", "an output path must name a file", 0);
    o->path = resolve_links(path);
    if (!o->path)
        return fail(err, errlen, path, "out of memory", 0);
    struct stat st;
    bool exists = stat(o->path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        fail(err, errlen, path, "is a folder, not a file", 0);
        outfile_abort(o);
        return false;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        o->fd = open(o->path, O_WRONLY | O_NOCTTY);
        if (o->fd < 0) {
            fail(err, errlen, path, "cannot open", errno);
            outfile_abort(o);
            return false;
        }
        return true;
    }
    o->tmp = temp_template(o->path);
    if (!o->tmp || (o->fd = mkstemp(o->tmp)) < 0) {
        int e = o->tmp ? errno : ENOMEM;
        free(o->tmp);
        o->tmp = NULL;
        fail(err, errlen, path, "cannot create a file in its folder", e);
        outfile_abort(o);
        return false;
    }
    track(o->tmp, true);
    /* mkstemp makes 0600; an output is as readable as any file the user creates */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(o->fd, exists ? st.st_mode & 07777 : 0666 & ~mask);
    return true;
}

FILE *outfile_stream(OutFile *o)
{
    if (!o->stream && o->fd >= 0)
        o->stream = fdopen(o->fd, "w");
    return o->stream;
}

/* Closes the stream or the descriptor, whichever owns the file; 0 or the first error. */
static int close_file(OutFile *o, bool sync)
{
    int e = 0;
    if (o->stream && (fflush(o->stream) != 0 || ferror(o->stream)))
        e = errno ? errno : EIO;
    if (sync && !e && fsync(o->fd) != 0)
        e = errno;
    if ((o->stream ? fclose(o->stream) : close(o->fd)) != 0 && !e)
        e = errno ? errno : EIO;
    o->stream = NULL;
    o->fd = -1;
    return e;
}

bool outfile_commit(OutFile *o, char *err, size_t errlen)
{
    int e = close_file(o, o->tmp != NULL);
    if (!e && o->tmp && rename(o->tmp, o->path) != 0)
        e = errno;
    if (e) {
        fail(err, errlen, o->path, "writing failed", e);
        outfile_abort(o);
        return false;
    }
    if (o->tmp)
        track(o->tmp, false);
    free(o->tmp);
    free(o->path);
    *o = (OutFile){ .fd = -1 };
    return true;
}

void outfile_abort(OutFile *o)
{
    if (o->fd >= 0)
        close_file(o, false);
    if (o->tmp) {
        unlink(o->tmp);
        track(o->tmp, false);
    }
    free(o->tmp);
    free(o->path);
    *o = (OutFile){ .fd = -1 };
}

bool outfile_check_writable(const char *path, char *err, size_t errlen)
{
    /* a FIFO's open would wait for a reader: ask for permission instead */
    char *target = path && *path ? resolve_links(path) : NULL;
    struct stat st;
    if (target && stat(target, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        bool ok = access(target, W_OK) == 0;
        free(target);
        return ok || fail(err, errlen, path, "cannot write", errno);
    }
    free(target);
    OutFile o;
    if (!outfile_open(&o, path, err, errlen))
        return false;
    outfile_abort(&o);
    return true;
}

bool outfile_check_kind(const char *path, char *err, size_t errlen)
{
    char *target = path && *path ? resolve_links(path) : NULL;
    struct stat st;
    const char *what = NULL;
    if (target && stat(target, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            what = "is a folder";
        else if (S_ISFIFO(st.st_mode))
            what = "is a FIFO (a named pipe: writing would wait for a reader)";
        else if (S_ISSOCK(st.st_mode))
            what = "is a socket";
    }
    free(target);
    if (!what)
        return true;
    if (err && errlen)
        snprintf(err, errlen, "%s %s, not a file (a regular file or a link to one is replaced "
                 "whole, a character device such as /dev/null is written through)", path, what);
    return false;
}

int outfile_write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno;
        if (k == 0)
            return EIO;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

size_t outfile_read_all(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t k = read(fd, (char *)buf + got, len - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    return got;
}
