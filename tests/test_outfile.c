/* autograd/outfile.h: an output replaces a file whole or not at all, follows symbolic links,
 * writes through to devices and pipes, and refuses folders and empty names. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "autograd/outfile.h"
#include "tests/outfile_check.h"

static char dir[] = "/tmp/test_outfile_XXXXXX";

static const char *in_dir(const char *name)
{
    static char bufs[4][512];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const char *slurp(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static bool put(const char *path, const char *text, bool commit, char *err, size_t len)
{
    OutFile o;
    if (!outfile_open(&o, path, err, len))
        return false;
    FILE *f = outfile_stream(&o);
    assert_non_null(f);
    fputs(text, f);
    if (!commit) {
        outfile_abort(&o);
        return true;
    }
    return outfile_commit(&o, err, len);
}

static void test_regular_file_replaced_whole(void **state)
{
    (void)state;
    const char *path = in_dir("a.txt");
    char err[256];
    spit(path, "old");
    assert_int_equal(chmod(path, 0640), 0);
    OutFile o;
    assert_true(outfile_open(&o, path, err, sizeof err));
    fputs("new", outfile_stream(&o));
    fflush(o.stream);
    /* until the commit the old file is whole and the new bytes are in the temporary file */
    assert_string_equal(slurp(path), "old");
    char tmp[1024];
    assert_true(outfile_temp_beside(path, tmp, sizeof tmp));
    assert_string_equal(slurp(tmp), "new");
    assert_true(outfile_commit(&o, err, sizeof err));
    assert_string_equal(slurp(path), "new");
    assert_true(outfile_no_temp_beside(path));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);   /* the replaced file's permissions kept */
}

static void test_abort_keeps_the_old_file(void **state)
{
    (void)state;
    const char *path = in_dir("b.txt");
    char err[256];
    spit(path, "old");
    assert_true(put(path, "half", false, err, sizeof err));
    assert_string_equal(slurp(path), "old");
    assert_true(outfile_no_temp_beside(path));
}

static void test_symlink_followed_and_kept(void **state)
{
    (void)state;
    const char *target = in_dir("target.txt"), *link = in_dir("link.txt");
    const char *dangling = in_dir("dangling.txt"), *later = in_dir("later.txt");
    char err[256];
    spit(target, "old");
    assert_int_equal(symlink("target.txt", link), 0);   /* relative to the link's folder */
    assert_true(put(link, "new", true, err, sizeof err));
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_string_equal(slurp(target), "new");
    /* a link to a file that does not exist yet creates that file */
    assert_int_equal(symlink(later, dangling), 0);
    assert_true(put(dangling, "made", true, err, sizeof err));
    assert_string_equal(slurp(later), "made");
    assert_int_equal(lstat(dangling, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
}

static void test_devices_and_pipes_written_through(void **state)
{
    (void)state;
    char err[256];
    assert_true(put("/dev/null", "discarded", true, err, sizeof err));
    struct stat st;
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    /* a FIFO: checking it must not wait for a reader; it stays a FIFO */
    const char *fifo = in_dir("fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_true(outfile_check_writable(fifo, err, sizeof err));
    assert_int_equal(stat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
}

static void test_refused_paths(void **state)
{
    (void)state;
    char err[256];
    assert_false(put("", "x", true, err, sizeof err));
    assert_non_null(strstr(err, "must name a file"));
    assert_false(put(dir, "x", true, err, sizeof err));
    assert_non_null(strstr(err, "is a folder"));
    const char *missing = in_dir("no/such/folder/x.txt");
    assert_false(outfile_check_writable(missing, err, sizeof err));
    assert_non_null(strstr(err, "No such file or directory"));
    assert_true(outfile_check_writable(in_dir("fresh.txt"), err, sizeof err));
    assert_true(access(in_dir("fresh.txt"), F_OK) != 0);   /* the check leaves nothing */
    assert_true(outfile_no_temp_beside(in_dir("fresh.txt")));
}

/* Issue 30: what cannot be a program's output file (a folder, a named FIFO, a socket, through a
 * link too) is named by outfile_check_kind; a file, a device and a fresh name pass. */
static void test_kinds_refused(void **state)
{
    (void)state;
    char err[512];
    const char *fifo = in_dir("kind_fifo"), *link = in_dir("kind_link");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(symlink(fifo, link), 0);
    assert_false(outfile_check_kind(fifo, err, sizeof err));
    assert_non_null(strstr(err, "is a FIFO"));
    assert_false(outfile_check_kind(link, err, sizeof err));
    assert_non_null(strstr(err, "is a FIFO"));
    assert_false(outfile_check_kind(dir, err, sizeof err));
    assert_non_null(strstr(err, "is a folder"));
    assert_true(outfile_check_kind("/dev/null", err, sizeof err));
    assert_true(outfile_check_kind(in_dir("kind_fresh.txt"), err, sizeof err));
    unlink(link);
    unlink(fifo);
}

/* Issue 30: a program that ends (exit) between open and commit, as one does on a failed write,
 * leaves no temporary file; a forked child's exit does not take its parent's. */
static void test_exit_removes_the_temporary(void **state)
{
    (void)state;
    const char *path = in_dir("exit.txt");
    char err[512];
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        OutFile o;
        if (!outfile_open(&o, path, err, sizeof err))
            _exit(3);
        exit(1);                /* no commit, no abort */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_true(outfile_no_temp_beside(path));
    OutFile mine;
    assert_true(outfile_open(&mine, path, err, sizeof err));
    pid = fork();
    if (pid == 0)
        exit(0);                /* the child's exit leaves the parent's file */
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_false(outfile_no_temp_beside(path));
    outfile_abort(&mine);
    assert_true(outfile_no_temp_beside(path));
}

/* Whole buffers through a pipe, as a process hands its results to its parent: a buffer larger
 * than the pipe holds goes through whole while the reader drains it; a read stops at end of
 * file with the count; a write into a pipe nobody reads is EPIPE, not a loop. */
static void test_whole_buffers_through_a_pipe(void **state)
{
    (void)state;
    enum { N = 1 << 18 };       /* 1 MiB of ints: more than a pipe's 64 KiB */
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        int *v = malloc(N * sizeof *v);
        if (!v)
            _exit(2);
        for (int i = 0; i < N; i++)
            v[i] = i * 7;
        _exit(outfile_write_all(p[1], v, N * sizeof *v) != 0);
    }
    close(p[1]);
    int *got = malloc((N + 1) * sizeof *got);
    assert_non_null(got);
    assert_int_equal(outfile_read_all(p[0], got, (N + 1) * sizeof *got), N * sizeof *got);
    for (int i = 0; i < N; i++)
        if (got[i] != i * 7)
            fail_msg("int %d is %d, not %d", i, got[i], i * 7);
    assert_int_equal(outfile_read_all(p[0], got, sizeof *got), 0);     /* at end of file */
    close(p[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    free(got);
    assert_int_equal(pipe(p), 0);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    int x = 1;
    assert_int_equal(outfile_write_all(p[1], &x, sizeof x), EPIPE);
    signal(SIGPIPE, SIG_DFL);
    close(p[1]);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regular_file_replaced_whole),
        cmocka_unit_test(test_abort_keeps_the_old_file),
        cmocka_unit_test(test_symlink_followed_and_kept),
        cmocka_unit_test(test_devices_and_pipes_written_through),
        cmocka_unit_test(test_kinds_refused),
        cmocka_unit_test(test_exit_removes_the_temporary),
        cmocka_unit_test(test_refused_paths),
        cmocka_unit_test(test_whole_buffers_through_a_pipe),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        failed++;
    return failed;
}
