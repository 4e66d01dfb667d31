/* Running the program again (examples/common/rerun.h). */
#include "examples/common/rerun.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The NUL-separated strings of a /proc file (cmdline, environ) into text, followed by one more
 * NUL; their length in bytes, or 0 when the file is unreadable or too long to trust. */
static size_t read_strings(const char *path, char *text, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(text, 1, size - 1, f);
    fclose(f);
    if (n == size - 1)
        return 0;
    text[n] = '\0';
    return n;
}

/* argv from /proc/self/cmdline. */
static char **own_arguments(void)
{
    static char text[1 << 16];
    size_t n = read_strings("/proc/self/cmdline", text, sizeof text);
    if (n == 0)
        return NULL;
    static char *argv[4096];
    int argc = 0;
    for (size_t i = 0; i < n && argc < 4095; i += strlen(text + i) + 1)
        argv[argc++] = text + i;
    argv[argc] = NULL;
    return argv;
}

void rerun_self(void)
{
    char **argv = own_arguments();
    if (!argv)
        return;
    fflush(NULL);               /* nothing buffered may be printed twice */
    execv("/proc/self/exe", argv);
}

const char *rerun_start_env(const char *name)
{
    static char text[1 << 16];
    static size_t n;
    static bool read;
    if (!read) {
        n = read_strings("/proc/self/environ", text, sizeof text);
        read = true;
    }
    if (n == 0)
        return getenv(name);    /* no /proc: what the environment says now */
    size_t k = strlen(name);
    for (size_t i = 0; i < n; i += strlen(text + i) + 1)
        if (strncmp(text + i, name, k) == 0 && text[i + k] == '=')
            return text + i + k + 1;
    return NULL;
}
