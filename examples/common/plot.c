#include "examples/common/plot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autograd/outfile.h"
#include "autograd/tensor.h"
#include "examples/common/cli.h"

enum { EXIT_NOT_FOUND = 127 };   /* what a shell reports for a missing command; ours too */

static char *grow_append(char *s, size_t *len, const char *add)
{
    size_t n = strlen(add);
    char *t = realloc(s, *len + n + 1);
    if (!t)
        tensor_fatal("out of memory for a gnuplot command");
    memcpy(t + *len, add, n + 1);
    *len += n;
    return t;
}

/* name1='value1'; name2='value2' with each ' doubled, gnuplot's escape inside '...'. The value
 * of output_var is replaced by out_value (the temporary file). */
static char *assignments(const char *const *names, const char *const *values, int n,
                         const char *output_var, const char *out_value)
{
    size_t len = 0;
    char *s = grow_append(NULL, &len, "");
    for (int i = 0; i < n; i++) {
        const char *v = output_var && strcmp(names[i], output_var) == 0 ? out_value : values[i];
        s = grow_append(s, &len, i ? "; " : "");
        s = grow_append(s, &len, names[i]);
        s = grow_append(s, &len, "='");
        for (const char *c = v; *c; c++)
            s = grow_append(s, &len, *c == '\'' ? "''" : (char[]){ *c, '\0' });
        s = grow_append(s, &len, "'");
    }
    return s;
}

/* An executable file called prog in a directory of $PATH. */
static bool on_path(const char *prog)
{
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t n = strcspn(path, ":");
        char file[4096];
        if (n > 0 && n + strlen(prog) + 2 < sizeof file) {
            snprintf(file, sizeof file, "%.*s/%s", (int)n, path, prog);
            if (access(file, X_OK) == 0)
                return true;
        }
        path += n + (path[n] == ':');
    }
    return false;
}

/* gnuplot -e SETS SCRIPT in a child process; its exit status, or EXIT_NOT_FOUND. */
static int run_gnuplot(const char *sets, const char *script)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execlp("gnuplot", "gnuplot", "-e", sets, script, (char *)NULL);
        _exit(EXIT_NOT_FOUND);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void explain(const char *why, const char *script, const char *sets)
{
    fprintf(stderr, "%s: note: %s; no figure made (the numbers are saved). To make it later:\n"
            "    gnuplot -e \"%s\" %s\n", cli_program(), why, sets, script);
}

/* A script named relative to the source tree ("examples/x/y.gp") is found from any working
 * directory: when it is not there relative to the current one, it is looked up under the source
 * folder the program was built from. The result lives in buf. */
static const char *find_script(const char *script, char *buf, size_t len)
{
#ifdef TAPEGRAD_SOURCE_DIR
    if (script[0] != '/' && access(script, R_OK) != 0) {
        snprintf(buf, len, "%s/%s", TAPEGRAD_SOURCE_DIR, script);
        if (access(buf, R_OK) == 0)
            return buf;
    }
#endif
    (void)buf;
    (void)len;
    return script;
}

/* Whether gnuplot left a PNG (or at least a non-empty file, for other terminals) at path. */
static bool wrote_figure(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char head[4] = { 0 };
    size_t n = f ? fread(head, 1, sizeof head, f) : 0;
    if (f)
        fclose(f);
    size_t len = strlen(path);
    bool png = len >= 4 && strcmp(path + len - 4, ".png") == 0;
    return n == sizeof head && (!png || memcmp(head, "\x89PNG", 4) == 0);
}

PlotStatus plot_run_vars(const char *script, const char *const *names,
                         const char *const *values, int n, const char *output_var)
{
    char found[4096], why[512];
    script = find_script(script, found, sizeof found);
    const char *output = NULL;
    for (int i = 0; output_var && i < n; i++)
        if (strcmp(names[i], output_var) == 0)
            output = values[i];
    char *shown = assignments(names, values, n, NULL, NULL);
    /* gnuplot writes the figure itself, into the temporary file of an OutFile (or through,
     * when the output is not a regular file); we rename it once gnuplot has succeeded. */
    OutFile out = { .fd = -1 };
    if (output && !outfile_open(&out, output, why, sizeof why)) {
        explain(why, script, shown);
        free(shown);
        return PLOT_FAILED;
    }
    const char *target = out.tmp ? out.tmp : out.path;
    char *sets = assignments(names, values, n, output_var, target);

    PlotStatus st = PLOT_OK;
    int rc = on_path("gnuplot") ? run_gnuplot(sets, script) : EXIT_NOT_FOUND;
    if (rc == EXIT_NOT_FOUND) {
        st = PLOT_NO_GNUPLOT;
        explain("gnuplot is not installed", script, shown);
    } else if (rc != 0) {
        st = PLOT_FAILED;
        explain("gnuplot failed", script, shown);
    } else if (output && out.tmp && !wrote_figure(out.tmp)) {
        st = PLOT_FAILED;
        explain("gnuplot wrote no figure", script, shown);
    } else if (output && !outfile_commit(&out, why, sizeof why)) {
        st = PLOT_FAILED;
        explain(why, script, shown);
    }
    if (st != PLOT_OK && output)
        outfile_abort(&out);
    free(sets);
    free(shown);
    return st;
}

PlotStatus plot_run(const char *script, const char *input, const char *output)
{
    const char *names[] = { "input", "output" };
    const char *values[] = { input, output };
    return plot_run_vars(script, names, values, 2, "output");
}
