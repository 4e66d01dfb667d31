#ifndef TAPEGRAD_EXAMPLES_JOBS_H
#define TAPEGRAD_EXAMPLES_JOBS_H
/* Jobs: training runs of train_gpt as subprocesses, several at once, and what their TSV logs
 * say. Programs that compare runs (lr_scaling, loss_scaling, memory_savers, fit_largest) start
 * train_gpt rather than a training loop of their own: their tables are then made by exactly
 * the program a student runs by hand, with the flags printed beside them. (A run in-process
 * is run/'s: run/run.h.) */
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

enum { JOB_MAX_ARGS = 48, JOB_ARG_LEN = 600 };

/* One train_gpt run: its arguments, and where its log and its console output go. */
typedef struct {
    char        args[JOB_MAX_ARGS][JOB_ARG_LEN];
    const char *argv[JOB_MAX_ARGS + 1];     /* NULL-terminated; argv[0] the program */
    int         argc;
    char        log_path[JOB_ARG_LEN];
    char        out_path[JOB_ARG_LEN];
} JobSpec;

/* What one run reports. */
typedef struct {
    bool   ok;            /* exited 0 with a final evaluation */
    bool   diverged;      /* train_gpt stopped on a non-finite loss */
    double val_loss;      /* at the last evaluation */
    double val_acc;       /* teacher-forced exact match at the last evaluation */
} JobResult;

/* The train_gpt program next to the calling one (argv0's folder): a default for --train-gpt.
 * The string is static, overwritten by the next call. */
const char *job_find_train_gpt(const char *argv0);
/* Appends one argument, formatted. */
void      job_arg(JobSpec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Runs it, waits, reads the log. */
JobResult job_run(const JobSpec *r);
/* The same in two halves, so that several runs can go at once. */
pid_t     job_start(const JobSpec *r);
JobResult job_wait(const JobSpec *r, pid_t pid);

/* What a run's console output (out_path) says beyond its log: the memory report's total peaks
 * (over the training steps, over the whole run: train_gpt's "  total" line) and the sample
 * printed between its "----" lines, newlines kept. Fields not found keep their values. */
typedef struct {
    size_t peak_step, peak_run;
    char   sample[4096];
} JobConsole;

/* False when out_path cannot be read. */
bool      job_read_console(const char *out_path, JobConsole *c);

/* Runs spec[0..n-1], `jobs` at a time (a group starts, then every run of it is waited for),
 * res[i] what run i reported. With labels, "run: LABEL" on stderr as run i starts. */
void      jobs_run(const JobSpec *spec, JobResult *res, int n, int jobs,
                  const char *const *labels);
/* A run's command line, the arguments separated by spaces, and a newline. */
void      job_print_command(FILE *f, const JobSpec *r);
/* The commands of spec[0..n-1] written to path as a whole (autograd/outfile.h: all or
 * nothing), so that a sweep killed later still leaves the list; exits with a message if it
 * cannot. */
void      jobs_commands_write(const char *path, const JobSpec *spec, int n);
/* Whether path lists exactly those commands, as jobs_commands_write wrote them: 1 yes, 0 it
 * lists others, -1 there is no such file. Whether logs left in a folder are these runs'. */
int       jobs_commands_match(const char *path, const JobSpec *spec, int n);
/* What job_wait said of a run that ended earlier, read from its files: true when its log ends
 * at step `steps` with a validation loss (ok) or its output says it diverged. */
bool      job_result_from_files(const JobSpec *r, long steps, JobResult *res);
/* mkdir, or exit with a message; a folder that exists already is fine. */
void      job_make_dir(const char *dir);
/* A run's log is read back with analysis/train_log.h (train_log_columns, train_log_last, ...). */

#endif
