#ifndef TAPEGRAD_RUN_RANKS_INTERNAL_H
#define TAPEGRAD_RUN_RANKS_INTERNAL_H
/* Between run/ranks.c and the pipeline's share of it, run/ranks_pipeline.c: a pipeline's
 * bookkeeping beside the strategy (dist/run.h runs it): the step's record (the bytes every rank
 * sent, each stage's peak act bytes, every event, the bubble measured, replayed, counted and by
 * formula), the printed lines, pipedream's stash and staleness before the trainer goes back. */
#include "run/ranks.h"

typedef struct RunPipe RunPipe;
RunPipe           *run_pipe_start(Trainer *tr, DistRun *run, int m, long steps, int B, int T);
int                run_pipe_stages(const RunPipe *pr);
void               run_pipe_describe(const RunPipe *pr);
const RunPipeStep *run_pipe_step_report(RunPipe *pr, long step, double lr, TrainStepResult r,
                                        double seconds, size_t act_peak, const EvalResult *ev);
void               run_pipe_training_done(RunPipe *pr);
void               run_pipe_report(RunPipe *pr);
void               run_pipe_end(RunPipe *pr);

#endif
