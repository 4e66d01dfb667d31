#ifndef TAPEGRAD_OUTFILE_CHECK_H
#define TAPEGRAD_OUTFILE_CHECK_H
/* For tests of programs and writers that go through autograd/outfile.h: whether a temporary
 * file (.NAME.XXXXXX) is left beside path, and its content while a writer still has it open. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The first temporary file of path's name in its folder, into buf; false if there is none. */
static inline bool outfile_temp_beside(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    char dir[512], prefix[512];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    snprintf(prefix, sizeof prefix, ".%s.", slash ? slash + 1 : path);
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(buf, len, "%s/%s", dir, e->d_name);
            found = true;
        }
    if (d)
        closedir(d);
    return found;
}

static inline bool outfile_no_temp_beside(const char *path)
{
    char buf[1024];
    return !outfile_temp_beside(path, buf, sizeof buf);
}

#endif
