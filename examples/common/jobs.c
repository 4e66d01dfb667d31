/* One train_gpt run as a subprocess, and reading its TSV log (jobs.h). */
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

#include "analysis/train_log.h"
#include "autograd/outfile.h"
#include "examples/common/cli.h"
#include "examples/common/jobs.h"

const char *job_find_train_gpt(const char *argv0)
{
    static char path[JOB_ARG_LEN];
    char copy[JOB_ARG_LEN];
    snprintf(copy, sizeof copy, "%s", argv0);
    snprintf(path, sizeof path, "%s/train_gpt", dirname(copy));
    return path;
}

void job_arg(JobSpec *r, const char *fmt, ...)
{
    if (r->argc == JOB_MAX_ARGS)
        cli_die(1, "too many arguments for one train_gpt run");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->args[r->argc], JOB_ARG_LEN, fmt, ap);
    va_end(ap);
    r->argv[r->argc] = r->args[r->argc];
    r->argv[++r->argc] = NULL;
}

pid_t job_start(const JobSpec *r)
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

JobResult job_wait(const JobSpec *r, pid_t pid)
{
    int status = 0;
    waitpid(pid, &status, 0);
    JobResult res = { .val_loss = NAN, .val_acc = NAN };
    bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        cli_die(1, "cannot run %s (build it first, or give --train-gpt)", r->argv[0]);
    res.diverged = !exited_ok && train_log_mentions(r->out_path, "diverged");
    if (!exited_ok && !res.diverged)
        cli_die(1, "%s failed; its output is in %s", r->argv[0], r->out_path);
    if (exited_ok) {
        res.val_loss = train_log_last(r->log_path, "val_loss");
        res.val_acc = train_log_last(r->log_path, "val_acc");
        res.ok = !isnan(res.val_loss);
    }
    return res;
}

JobResult job_run(const JobSpec *r)
{
    return job_wait(r, job_start(r));
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

bool job_read_console(const char *out_path, JobConsole *c)
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

void jobs_run(const JobSpec *spec, JobResult *res, int n, int jobs, const char *const *labels)
{
    pid_t *pid = malloc((size_t)n * sizeof *pid);
    if (!pid)
        cli_die(1, "out of memory");
    for (int first = 0; first < n; first += jobs) {
        int last = first + jobs < n ? first + jobs : n;
        for (int i = first; i < last; i++) {
            if (labels)
                fprintf(stderr, "run: %s\n", labels[i]);
            pid[i] = job_start(&spec[i]);
        }
        for (int i = first; i < last; i++)
            res[i] = job_wait(&spec[i], pid[i]);
    }
    free(pid);
}

void job_print_command(FILE *f, const JobSpec *r)
{
    for (int i = 0; i < r->argc; i++)
        fprintf(f, "%s%s", i ? " " : "", r->argv[i]);
    fputc('\n', f);
}

void jobs_commands_write(const char *path, const JobSpec *spec, int n)
{
    char err[900];
    OutFile out;
    if (!outfile_open(&out, path, err, sizeof err))
        cli_die(1, "%s", err);
    FILE *f = outfile_stream(&out);
    if (!f)
        cli_die(1, "%s: out of memory", path);
    for (int i = 0; i < n; i++)
        job_print_command(f, &spec[i]);
    if (!outfile_commit(&out, err, sizeof err))
        cli_die(1, "%s", err);
}

int jobs_commands_match(const char *path, const JobSpec *spec, int n)
{
    char *want = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&want, &len);
    if (!m)
        cli_die(1, "out of memory");
    for (int i = 0; i < n; i++)
        job_print_command(m, &spec[i]);
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

bool job_result_from_files(const JobSpec *r, long steps, JobResult *res)
{
    *res = (JobResult){ .val_loss = train_log_last(r->log_path, "val_loss"),
                        .val_acc = train_log_last(r->log_path, "val_acc") };
    res->ok = !isnan(res->val_loss) && train_log_last(r->log_path, "step") == (double)steps;
    res->diverged = !res->ok && train_log_mentions(r->out_path, "diverged");
    return res->ok || res->diverged;
}

void job_make_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0755) != 0 && stat(dir, &st) != 0)
        cli_die(1, "cannot create %s", dir);
}
