#ifndef TAPEGRAD_TRAIN_RUN_H
#define TAPEGRAD_TRAIN_RUN_H
/* One training run of train_gpt as a subprocess, and what its TSV log says. Programs that
 * compare runs (lr_scaling, loss_scaling) start train_gpt rather than a training loop of their
 * own: their tables are then made by exactly the program a student runs by hand, with the
 * flags printed beside them. */
#include <stdbool.h>
#include <sys/types.h>

enum { RUN_MAX_ARGS = 48, RUN_ARG_LEN = 600 };

/* One train_gpt run: its arguments, and where its log and its console output go. */
typedef struct {
    char        args[RUN_MAX_ARGS][RUN_ARG_LEN];
    const char *argv[RUN_MAX_ARGS + 1];     /* NULL-terminated; argv[0] the program */
    int         argc;
    char        log_path[RUN_ARG_LEN];
    char        out_path[RUN_ARG_LEN];
} RunSpec;

/* What one run reports. */
typedef struct {
    bool   ok;            /* exited 0 with a final evaluation */
    bool   diverged;      /* train_gpt stopped on a non-finite loss */
    double val_loss;      /* at the last evaluation */
    double val_acc;       /* teacher-forced exact match at the last evaluation */
} RunResult;

/* The train_gpt program next to the calling one (argv0's folder): a default for --train-gpt.
 * The string is static, overwritten by the next call. */
const char *run_find_train_gpt(const char *argv0);
/* Appends one argument, formatted. */
void      run_arg(RunSpec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Runs it, waits, reads the log. */
RunResult run_train_gpt(const RunSpec *r);
/* The same in two halves, so that several runs can go at once. */
pid_t     run_start(const RunSpec *r);
RunResult run_wait(const RunSpec *r, pid_t pid);

/* What a run's console output (out_path) says beyond its log: the memory report's total peaks
 * (over the training steps, over the whole run: train_gpt's "  total" line) and the sample
 * printed between its "----" lines, newlines kept. Fields not found keep their values. */
typedef struct {
    size_t peak_step, peak_run;
    char   sample[4096];
} RunConsole;

/* False when out_path cannot be read. */
bool      run_read_console(const char *out_path, RunConsole *c);

/* A log's columns `x` and `y` where both cells are present, up to max rows; returns the count. */
int       run_read_columns(const char *log_path, const char *x, const char *y, double *xs,
                           double *ys, int max);
/* The last non-empty cell of a column (NAN if none, or no such column or file). */
double    run_last_value(const char *log_path, const char *column);

#endif
