#ifndef TAPEGRAD_PIPELINE_SCHEDULE_H
#define TAPEGRAD_PIPELINE_SCHEDULE_H
/* Pipeline schedules as data (docs/pipeline.md). The model's L blocks are cut into p stages,
 * one per rank; a global batch is cut into m micro-batches. A schedule is, for every stage, the
 * ordered list of actions that stage performs in one step:
 *
 *     F k   forward of micro-batch k through this stage's blocks (input from stage s-1, output
 *           to stage s+1)
 *     B k   backward of micro-batch k (dy from stage s+1, dx to stage s-1)
 *
 * The three schedules of the lecture, on stage s of p, m micro-batches:
 *     naive   F0 B0 F1 B1 ... : one micro-batch through the whole model and back before the
 *             next starts, so only one stage works at any moment (bubble (p-1)/p).
 *     gpipe   F0 .. F(m-1), then B0 .. B(m-1): the pipe is filled, then drained; stage s holds
 *             the activations of all m micro-batches at the turn. Bubble (p-1)/(m+p-1).
 *     1f1b    w = min(p-1-s, m) warm-up forwards, then one forward and one backward in turn,
 *             then the w remaining backwards (PipeDream-flush). Same bubble as GPipe, but stage
 *             s holds at most w+1 <= p micro-batches of activations.
 * Backwards run in micro-batch order 0, 1, ... in every schedule, so each parameter's gradient
 * is summed in the order one process accumulating m micro-batches sums it (bit for bit).
 *
 * And PipeDream's asynchronous 1F1B (pipedream), which never flushes: the micro-batches form
 * one stream over the steps, stage s runs w = p-1-s forwards ahead of its backwards forever,
 * and updates its weights after every backward (dist/pipeline.h: weight stashing). A step is a
 * window of the stream: on stage s the m forwards of this step's micro-batches, each followed
 * by the backward of the micro-batch w before it,
 *     F0 B(-w) F1 B(1-w) ... F(m-1) B(m-1-w)
 * where a negative number is one of the previous step's micro-batches (m + that number), whose
 * backward was left in flight. It needs m >= p (every window ends in a backward). Stage s holds
 * w + 1 = p - s micro-batches in flight, as in 1F1B, but across the step boundary.
 *
 * Dependencies (what the runtime waits for): F k on stage s needs F k on s-1; B k on s needs
 * B k on s+1 (on the last stage, its own F k). pipe_simulate plays a schedule against them with
 * given action durations: the bubble "counted from the schedule", free of timing noise. */
#include <stdbool.h>
#include <stddef.h>

/* The synchronous schedules (one update per step, equal to one process) come first: a loop
 * k < PIPE_NSCHED covers them; the asynchronous one follows. */
typedef enum {
    PIPE_NAIVE, PIPE_GPIPE, PIPE_1F1B, PIPE_NSCHED,
    PIPE_PIPEDREAM = PIPE_NSCHED, PIPE_NKINDS
} PipeSchedKind;
extern const char *const PIPE_SCHED_NAMES[];  /* "naive", "gpipe", "1f1b", "pipedream", NULL */
bool pipe_sched_parse(const char *name, PipeSchedKind *out);

typedef enum { PIPE_F = 'F', PIPE_B = 'B' } PipeActKind;
typedef struct {
    char kind;          /* PIPE_F or PIPE_B */
    int  mb;            /* micro-batch */
} PipeAction;

typedef struct {
    PipeSchedKind kind;
    int           p, m;
    int           n_actions;        /* 2 m on every stage */
    PipeAction   *actions;          /* [p][2 m], stage s at actions + s * 2 m */
} PipeSchedule;

/* The schedule of kind for p stages and m micro-batches (p, m >= 1; pipedream: m >= p). Free
 * with pipe_schedule_free. */
PipeSchedule pipe_schedule_new(PipeSchedKind kind, int p, int m);
void         pipe_schedule_free(PipeSchedule *s);
const PipeAction *pipe_stage_actions(const PipeSchedule *s, int stage);
/* "F0 F1 B0 F2 B1 ..." for one stage into buf. */
const char  *pipe_stage_string(const PipeSchedule *s, int stage, char *buf, size_t len);
/* The largest number of micro-batches whose forward has run and backward has not, on stage s:
 * how many micro-batches of activations the stage holds at its peak (pipedream: counting the
 * previous step's in flight). */
int          pipe_max_in_flight(const PipeSchedule *s, int stage);

/* Plays the schedule with forward duration f[s] and backward duration b[s] on stage s (NULL:
 * 1 and 2 for every stage, the usual ratio), every message instant. busy[s] (if not NULL)
 * receives stage s's compute time; returns the makespan. With equal stages GPipe and 1F1B give
 * a makespan (m + p - 1)(f + b) and a bubble 1 - m (f + b) / makespan = (p-1)/(m+p-1).
 * pipedream's window starts with every stage ready (the backwards of the previous step's
 * micro-batches have their inputs): one window between two synchronisations of the stages. */
double       pipe_simulate(const PipeSchedule *s, const double *f, const double *b,
                           double *busy);
/* pipedream in steady state, no synchronisation between steps: the stream of many windows
 * played (1F1B's order over all their micro-batches, without a flush), the span of one more
 * window measured; returns the mean over stages of 1 - m (f + b) / that span (busy as above,
 * per window). 0 with equal stages: only an imbalance between stages is left. */
double       pipe_simulate_steady(int p, int m, const double *f, const double *b, double *busy);
/* The formula (p-1)/(m+p-1) (GPipe, 1F1B), (p-1)/p (naive), 0 (pipedream, steady state). */
double       pipe_bubble_formula(PipeSchedKind kind, int p, int m);

/* The split of L blocks over p stages: first[s] is stage s's first block, first[p] = L.
 * text NULL: an even split, which needs p to divide L. text "2,1,1": the block counts, p of
 * them, each >= 1, summing to L. False with one sentence in err otherwise. */
bool         pipe_split_parse(const char *text, int n_layer, int p, int *first, char *err,
                              size_t len);

#endif
