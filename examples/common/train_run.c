/* One train_gpt run as a subprocess, and reading its TSV log (train_run.h). */
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autograd/outfile.h"
#include "examples/common/cli.h"
#include "examples/common/train_run.h"

const char *run_find_train_gpt(const char *argv0)
{
    static char path[RUN_ARG_LEN];
    char copy[RUN_ARG_LEN];
    snprintf(copy, sizeof copy, "%s", argv0);
    snprintf(path, sizeof path, "%s/train_gpt", dirname(copy));
    return path;
}

void run_arg(RunSpec *r, const char *fmt, ...)
{
    if (r->argc == RUN_MAX_ARGS)
        cli_die(1, "too many arguments for one train_gpt run");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->args[r->argc], RUN_ARG_LEN, fmt, ap);
    va_end(ap);
    r->argv[r->argc] = r->args[r->argc];
    r->argv[++r->argc] = NULL;
}

/* The column index of name in a tab-separated header line, or -1. */
static int column_index(char *header, const char *name)
{
    header[strcspn(header, "\r\n")] = '\0';
    int i = 0;
    for (char *save = NULL, *tok = strtok_r(header, "\t", &save); tok;
         tok = strtok_r(NULL, "\t", &save), i++)
        if (strcmp(tok, name) == 0)
            return i;
    return -1;
}

/* Cell i of a row as a number; NAN when empty or not a number. Cells may be empty, so the line
 * is walked tab by tab (strtok would merge empty cells). */
static double cell(const char *line, int i)
{
    const char *p = line;
    for (int k = 0; k < i && p; k++) {
        p = strchr(p, '\t');
        if (p)
            p++;
    }
    if (!p || *p == '\t' || *p == '\n' || *p == '\0')
        return NAN;
    char *end;
    double v = strtod(p, &end);
    return end == p ? NAN : v;
}

/* Calls fn for every row of the log with the cells of columns x and y (NAN when empty). */
typedef void (*RowFn)(double x, double y, void *ctx);

static void each_row(const char *log_path, const char *x, const char *y, RowFn fn, void *ctx)
{
    FILE *f = fopen(log_path, "r");
    if (!f)
        return;
    char *line = NULL, *copy = NULL;
    size_t cap = 0;
    int ix = -1, iy = -1;
    if (getline(&line, &cap, f) > 0 && (copy = strdup(line)) != NULL) {
        ix = column_index(copy, x);
        strcpy(copy, line);
        iy = column_index(copy, y);
    }
    while (ix >= 0 && iy >= 0 && getline(&line, &cap, f) > 0)
        fn(cell(line, ix), cell(line, iy), ctx);
    free(copy);
    free(line);
    fclose(f);
}

typedef struct {
    double *xs, *ys;
    int     n, max;
} Columns;

static void keep_pair(double x, double y, void *ctx)
{
    Columns *c = ctx;
    if (!isnan(x) && !isnan(y) && c->n < c->max) {
        c->xs[c->n] = x;
        c->ys[c->n] = y;
        c->n++;
    }
}

int run_read_columns(const char *log_path, const char *x, const char *y, double *xs, double *ys,
                     int max)
{
    Columns c = { xs, ys, 0, max };
    each_row(log_path, x, y, keep_pair, &c);
    return c.n;
}

static void keep_last(double x, double y, void *ctx)
{
    (void)x;
    if (!isnan(y))
        *(double *)ctx = y;
}

void run_read_by_step(const char *log_path, const char *name, long steps, double *v)
{
    double *xs = malloc((size_t)steps * sizeof *xs), *ys = malloc((size_t)steps * sizeof *ys);
    if (!xs || !ys)
        cli_die(1, "out of memory");
    int n = run_read_columns(log_path, "step", name, xs, ys, (int)steps);
    for (int i = 0; i < n; i++)
        if (xs[i] >= 1 && xs[i] <= steps)
            v[(long)xs[i]] = ys[i];
    free(xs);
    free(ys);
}

double run_last_value(const char *log_path, const char *column)
{
    double v = NAN;
    each_row(log_path, "step", column, keep_last, &v);
    return v;
}

static bool file_mentions(const char *path, const char *word)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char buf[1024];
    bool found = false;
    while (!found && fgets(buf, sizeof buf, f))
        found = strstr(buf, word) != NULL;
    fclose(f);
    return found;
}

pid_t run_start(const RunSpec *r)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        cli_die(1, "cannot start %s", r->argv[0]);
    if (pid == 0) {
        int fd = open(r->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execv(r->argv[0], (char *const *)r->argv);
        fprintf(stderr, "cannot run %s\n", r->argv[0]);
        _exit(127);
    }
    return pid;
}

RunResult run_wait(const RunSpec *r, pid_t pid)
{
    int status = 0;
    waitpid(pid, &status, 0);
    RunResult res = { .val_loss = NAN, .val_acc = NAN };
    bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        cli_die(1, "cannot run %s (build it first, or give --train-gpt)", r->argv[0]);
    res.diverged = !exited_ok && file_mentions(r->out_path, "diverged");
    if (!exited_ok && !res.diverged)
        cli_die(1, "%s failed; its output is in %s", r->argv[0], r->out_path);
    if (exited_ok) {
        res.val_loss = run_last_value(r->log_path, "val_loss");
        res.val_acc = run_last_value(r->log_path, "val_acc");
        res.ok = !isnan(res.val_loss);
    }
    return res;
}

RunResult run_train_gpt(const RunSpec *r)
{
    return run_wait(r, run_start(r));
}

/* "  total  <step peak> <text>  <run peak> <text>" in train_gpt's memory report. */
static bool parse_peaks(const char *line, size_t *step, size_t *run)
{
    char unit1[16], unit2[16];
    double v1, v2;
    return sscanf(line, " total %zu %lf %15s %zu %lf %15s", step, &v1, unit1, run, &v2,
                  unit2) == 6 ||
           sscanf(line, " total %zu %lf %15s %zu", step, &v1, unit1, run) == 4;
}

bool run_read_console(const char *out_path, RunConsole *c)
{
    FILE *f = fopen(out_path, "r");
    if (!f)
        return false;
    char line[1024];
    int in_sample = 0;      /* 1 after "sample (", 2 between the ---- lines */
    size_t len = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "  total ", 8) == 0)
            parse_peaks(line, &c->peak_step, &c->peak_run);
        if (in_sample == 0 && strncmp(line, "sample (", 8) == 0) {
            in_sample = 1;
        } else if (strcmp(line, "----\n") == 0) {
            in_sample = in_sample == 1 ? 2 : 3;
        } else if (in_sample == 2) {
            size_t n = strlen(line);
            if (len + n >= sizeof c->sample)
                n = sizeof c->sample - 1 - len;
            memcpy(c->sample + len, line, n);
            len += n;
            c->sample[len] = '\0';
        }
    }
    fclose(f);
    if (len && c->sample[len - 1] == '\n')
        c->sample[len - 1] = '\0';
    return true;
}

void run_jobs(const RunSpec *spec, RunResult *res, int n, int jobs, const char *const *labels)
{
    pid_t *pid = malloc((size_t)n * sizeof *pid);
    if (!pid)
        cli_die(1, "out of memory");
    for (int first = 0; first < n; first += jobs) {
        int last = first + jobs < n ? first + jobs : n;
        for (int i = first; i < last; i++) {
            if (labels)
                fprintf(stderr, "run: %s\n", labels[i]);
            pid[i] = run_start(&spec[i]);
        }
        for (int i = first; i < last; i++)
            res[i] = run_wait(&spec[i], pid[i]);
    }
    free(pid);
}

void run_print_command(FILE *f, const RunSpec *r)
{
    for (int i = 0; i < r->argc; i++)
        fprintf(f, "%s%s", i ? " " : "", r->argv[i]);
    fputc('\n', f);
}

void run_commands_write(const char *path, const RunSpec *spec, int n)
{
    char err[900];
    OutFile out;
    if (!outfile_open(&out, path, err, sizeof err))
        cli_die(1, "%s", err);
    FILE *f = outfile_stream(&out);
    if (!f)
        cli_die(1, "%s: out of memory", path);
    for (int i = 0; i < n; i++)
        run_print_command(f, &spec[i]);
    if (!outfile_commit(&out, err, sizeof err))
        cli_die(1, "%s", err);
}

int run_commands_match(const char *path, const RunSpec *spec, int n)
{
    char *want = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&want, &len);
    if (!m)
        cli_die(1, "out of memory");
    for (int i = 0; i < n; i++)
        run_print_command(m, &spec[i]);
    fclose(m);
    FILE *f = fopen(path, "r");
    if (!f) {
        free(want);
        return -1;
    }
    /* one byte more than wanted: a longer file differs */
    char *have = malloc(len + 1);
    if (!have)
        cli_die(1, "out of memory");
    size_t got = fread(have, 1, len + 1, f);
    fclose(f);
    bool same = got == len && memcmp(have, want, len) == 0;
    free(have);
    free(want);
    return same;
}

bool run_result_from_files(const RunSpec *r, long steps, RunResult *res)
{
    *res = (RunResult){ .val_loss = run_last_value(r->log_path, "val_loss"),
                        .val_acc = run_last_value(r->log_path, "val_acc") };
    res->ok = !isnan(res->val_loss) && run_last_value(r->log_path, "step") == (double)steps;
    res->diverged = !res->ok && file_mentions(r->out_path, "diverged");
    return res->ok || res->diverged;
}

void run_make_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0755) != 0 && stat(dir, &st) != 0)
        cli_die(1, "cannot create %s", dir);
}
