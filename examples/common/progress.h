#ifndef TAPEGRAD_PROGRESS_H
#define TAPEGRAD_PROGRESS_H
/* The progress of a long run: step, loss, tokens per second and time left.
 *
 * On a terminal one line is redrawn in place (carriage return, at most ten times a second, and
 * always for the last step); anywhere else (a pipe, a log file, CI) plain lines are printed,
 * one every plain_every steps plus the first and the last, so logs stay readable:
 *
 *     step 120/1000  loss 1.2345  48.2k tok/s  ETA 1m23s  lr 3e-04
 *
 * Steps count completed updates: after the k-th update, call progress_update with step = k.
 * Rates and ETA are measured from progress_start, so a resumed run (first_step > 0) does not
 * count the steps it did not do. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE  *out;           /* stdout; a test may point it elsewhere */
    bool   tty;           /* redraw one line (cli_stdout_is_tty), or print plain lines */
    long   first_step, total;
    long   plain_every;
    double start, last_draw;
    long long tokens;     /* tokens processed since start */
    size_t drawn;         /* characters of the line now on screen, 0 if none */
} Progress;

/* Steps first_step + 1 .. total are about to run. plain_every < 1 means every step. */
void   progress_start(Progress *p, long first_step, long total, long plain_every);
/* After step `step` (1-based), which processed `tokens` tokens. extra may be NULL. */
void   progress_update(Progress *p, long step, double loss, long long tokens, const char *extra);
/* A line of its own (an evaluation result, a warning): on a terminal it replaces the redrawn
 * line, which comes back below it at the next update. */
void   progress_note(Progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ends the redrawn line, so what follows starts on a fresh one. */
void   progress_finish(Progress *p);

/* The line itself, for a caller's buffer: eta_s < 0 prints no ETA. */
const char *progress_format(char *buf, size_t len, long step, long total, double loss,
                            double tokens_per_s, double eta_s, const char *extra);
/* "1h02m", "3m07s", "12s"; "48.2k", "1.23M" (numbers with a unit prefix). */
const char *progress_format_duration(double seconds, char *buf, size_t len);
const char *progress_format_rate(double per_s, char *buf, size_t len);
/* Monotonic seconds. */
double progress_now(void);
/* The user CPU seconds of this process and of its children that have been waited for (a study
 * shared over forked processes): beside the wall clock, what a run cost. */
double progress_cpu_seconds(void);

#endif
