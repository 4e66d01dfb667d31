/* Running the program again (examples/common/rerun.h). */
#include "examples/common/rerun.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* argv from /proc/self/cmdline: NUL-separated arguments. */
static char **own_arguments(void)
{
    static char text[1 << 16];
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return NULL;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    if (n == 0 || n == sizeof text - 1)
        return NULL;            /* unreadable, or too long to trust */
    text[n] = '\0';
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
