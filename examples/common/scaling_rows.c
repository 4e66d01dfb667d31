/* A scaling run's row, a study point's row and their progress line (scaling_rows.h). */
#include "examples/common/scaling_rows.h"

bool scaling_write_row(TsvWriter *w, const ScalingRun *r)
{
    tsv_int(w, r->layers);
    tsv_int(w, r->width);
    tsv_int(w, r->heads);
    tsv_num(w, r->N);
    tsv_num(w, r->D);
    tsv_num(w, r->C);
    tsv_num(w, r->budget);
    tsv_int(w, r->steps);
    tsv_num(w, r->lr);
    tsv_num(w, r->val_loss);
    tsv_num(w, r->seconds);
    tsv_num(w, r->flop);
    return tsv_end_row(w);
}

bool scaling_write_point(TsvWriter *w, const ScalingPoint *p)
{
    tsv_int(w, p->layers);
    tsv_int(w, p->width);
    tsv_int(w, p->heads);
    tsv_int(w, (long long)p->seed);
    tsv_num(w, p->N_nonemb);
    tsv_num(w, p->N_all);
    tsv_str(w, SCALING_COUNT_NAMES[p->count]);
    tsv_str(w, SCALING_SCHED_NAMES[p->schedule]);
    tsv_num(w, p->budget);
    tsv_int(w, p->steps);
    tsv_num(w, p->D);
    tsv_num(w, p->lr);
    tsv_num(w, p->val_loss);
    tsv_num(w, p->trained);
    tsv_num(w, p->flop);
    tsv_num(w, p->seconds);
    return tsv_end_row(w);
}

static void watch_begin(void *ctx, long steps)
{
    progress_start(ctx, 0, steps, steps / 2);
}

static void watch_step(void *ctx, long step, double loss, long long tokens, const char *label)
{
    progress_update(ctx, step, loss, tokens, label);
}

static void watch_end(void *ctx)
{
    progress_finish(ctx);
}

ScalingWatch scaling_watch_progress(Progress *prog)
{
    return (ScalingWatch){ .begin = watch_begin, .step = watch_step, .end = watch_end,
                           .ctx = prog };
}
