#include "examples/common/progress.h"

#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "examples/common/cli.h"

static const double REDRAW_SECONDS = 0.1;

double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double progress_cpu_seconds(void)
{
    struct rusage self, children;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    return (double)self.ru_utime.tv_sec + 1e-6 * (double)self.ru_utime.tv_usec +
           (double)children.ru_utime.tv_sec + 1e-6 * (double)children.ru_utime.tv_usec;
}

const char *progress_format_duration(double seconds, char *buf, size_t len)
{
    long s = seconds > 0 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600)
        snprintf(buf, len, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else if (s >= 60)
        snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(buf, len, "%lds", s);
    return buf;
}

const char *progress_format_rate(double per_s, char *buf, size_t len)
{
    if (per_s >= 1e6)
        snprintf(buf, len, "%.3gM", per_s / 1e6);
    else if (per_s >= 1e3)
        snprintf(buf, len, "%.3gk", per_s / 1e3);
    else
        snprintf(buf, len, "%.3g", per_s);
    return buf;
}

const char *progress_format(char *buf, size_t len, long step, long total, double loss,
                            double tokens_per_s, double eta_s, const char *extra)
{
    char rate[32], eta[32] = "";
    progress_format_rate(tokens_per_s, rate, sizeof rate);
    if (eta_s >= 0) {
        char d[24];
        snprintf(eta, sizeof eta, "  ETA %s", progress_format_duration(eta_s, d, sizeof d));
    }
    snprintf(buf, len, "step %ld/%ld  loss %.4f  %s tok/s%s%s%s", step, total, loss, rate, eta,
             extra ? "  " : "", extra ? extra : "");
    return buf;
}

void progress_start(Progress *p, long first_step, long total, long plain_every)
{
    memset(p, 0, sizeof *p);
    p->out = stdout;
    p->tty = cli_stdout_is_tty();
    p->first_step = first_step;
    p->total = total;
    p->plain_every = plain_every < 1 ? 1 : plain_every;
    p->start = progress_now();
}

/* Which steps show: on a terminal, ten redraws a second at most; elsewhere every plain_every
 * steps. Both always show the first and the last. */
static bool should_show(const Progress *p, long step, double now)
{
    if (step == p->first_step + 1 || step >= p->total)
        return true;
    if (p->tty)
        return now - p->last_draw >= REDRAW_SECONDS;
    return step % p->plain_every == 0;
}

/* On a terminal the line overwrites the previous one; spaces erase what a longer one left. */
static void show(Progress *p, const char *line)
{
    if (!p->tty) {
        fprintf(p->out, "%s\n", line);
        fflush(p->out);
        return;
    }
    size_t n = strlen(line);
    fprintf(p->out, "\r%s", line);
    for (size_t i = n; i < p->drawn; i++)
        fputc(' ', p->out);
    fflush(p->out);
    p->drawn = n > 0 ? n : 1;
}

void progress_update(Progress *p, long step, double loss, long long tokens, const char *extra)
{
    double now = progress_now();
    p->tokens += tokens;
    if (!should_show(p, step, now))
        return;
    double elapsed = now - p->start;
    long done = step - p->first_step;
    double rate = elapsed > 0 ? (double)p->tokens / elapsed : 0.0;
    double eta = done > 0 ? elapsed / (double)done * (double)(p->total - step) : -1.0;
    char line[256];
    progress_format(line, sizeof line, step, p->total, loss, rate, eta, extra);
    show(p, line);
    p->last_draw = now;
}

void progress_finish(Progress *p)
{
    if (p->tty && p->drawn) {
        fputc('\n', p->out);
        fflush(p->out);
    }
    p->drawn = 0;
}

/* The note takes the place of the redrawn line, which reappears at the next update. */
void progress_note(Progress *p, const char *fmt, ...)
{
    if (p->tty && p->drawn) {
        fputc('\r', p->out);
        for (size_t i = 0; i < p->drawn; i++)
            fputc(' ', p->out);
        fputc('\r', p->out);
        p->drawn = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->out, fmt, ap);
    va_end(ap);
    fputc('\n', p->out);
    fflush(p->out);
}
