/* A trainer's steps on the ranks, whatever the strategy (dist/run.h). */
#include "dist/run.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct DistRun {
    DistRunConfig  cfg;
    Trainer       *t;
    DistComm      *world;
    DistComm      *comm;            /* the step's: the world, or this replica's pipeline */
    DistComm      *dp;              /* pipeline: this stage's data group (NULL: one replica) */
    Ddp           *ddp;
    Zero          *zero;
    Pipeline      *pp;              /* one of the three, until dist_run_give_back */
    int           *first;           /* pipeline: [p + 1] */
    int            p, replica;
    DistRunTraffic traffic;
};

static bool fail(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return false;
}

/* ---- the plan ------------------------------------------------------------------------------ */

/* "pipeline:S[,dpD[,zero1]]" */
static bool parse_pipeline(const char *text, DistPlan *plan, char *why, size_t len)
{
    char name[32];
    const char *comma = strchr(text, ',');
    size_t n = comma ? (size_t)(comma - text) : strlen(text);
    if (n - 9 >= sizeof name)
        return fail(why, len, "no schedule named so");
    memcpy(name, text + 9, n - 9);
    name[n - 9] = '\0';
    if (!pipe_sched_parse(name, &plan->sched))
        return fail(why, len, "the schedule is naive, gpipe, 1f1b or pipedream");
    if (comma) {
        char *end;
        long d = strncmp(comma, ",dp", 3) == 0 ? strtol(comma + 3, &end, 10) : 0;
        if (d < 1 || d > 4096)
            return fail(why, len, "after the schedule comes ,dpD with 1 <= D <= 4096 "
                        "data-parallel replicas");
        plan->replicas = (int)d;
        if (strcmp(end, ",zero1") == 0)
            plan->zero_level = 1;
        else if (*end != '\0')
            return fail(why, len, "after dpD comes nothing or ,zero1 (ZeRO-1 inside the data "
                        "groups; levels 2 and 3 are not built inside a pipeline)");
    }
    if (plan->sched == PIPE_PIPEDREAM && plan->replicas > 1)
        return fail(why, len, "pipedream has no data-parallel replicas (its stages update on "
                    "their own, with no step to all-reduce at)");
    if (plan->zero_level && plan->replicas < 2)
        return fail(why, len, "zero1 shards over the data-parallel replicas: give dpD with "
                    "D >= 2");
    return true;
}

bool dist_plan_parse(const char *text, DistPlan *plan, char *why, size_t len)
{
    static const char *const names[] = { "none", "ddp", "zero1", "zero2", "zero3" };
    *plan = (DistPlan){ .kind = DIST_RUN_NONE, .sched = PIPE_GPIPE, .replicas = 1 };
    for (int k = 0; k < 5; k++)
        if (strcmp(text, names[k]) == 0) {
            plan->kind = k == 0 ? DIST_RUN_NONE : k == 1 ? DIST_RUN_DDP : DIST_RUN_ZERO;
            plan->zero_level = k >= 2 ? k - 1 : 0;
            return true;
        }
    if (strncmp(text, "pipeline:", 9) != 0)
        return fail(why, len, "expected none, ddp, zero1, zero2, zero3 or pipeline:S with S "
                    "naive, gpipe, 1f1b or pipedream (pipeline:S,dpD and pipeline:S,dpD,zero1 "
                    "add D data-parallel replicas)");
    plan->kind = DIST_RUN_PIPELINE;
    return parse_pipeline(text, plan, why, len);
}

int dist_run_batch_groups(const DistPlan *plan, int ranks)
{
    if (plan->kind == DIST_RUN_PIPELINE)
        return plan->replicas;
    return plan->kind == DIST_RUN_NONE ? 1 : ranks;
}

/* ---- setting up ---------------------------------------------------------------------------- */

/* Replica r is ranks r p .. r p + p - 1, stage s of it rank r p + s. */
static bool start_pipeline(DistRun *r, char *why, size_t len)
{
    const DistPlan *plan = &r->cfg.plan;
    const TrainerConfig *tc = &r->t->cfg;
    int D = plan->replicas, m = r->cfg.micro_batches;
    if (r->world->size % D != 0)
        return fail(why, len, "%d ranks are not %d replicas of a pipeline", r->world->size, D);
    r->p = r->world->size / D;
    r->replica = r->world->rank / r->p;
    r->comm = D > 1 ? dist_split(r->world, r->replica, r->world->rank % r->p) : r->world;
    if (D > 1)
        r->dp = dist_split(r->world, r->world->rank % r->p, r->replica);
    r->first = malloc((size_t)(r->p + 1) * sizeof *r->first);
    if (!r->first)
        dist_fail("out of memory");
    if (!pipe_split_parse(r->cfg.stages, tc->model.n_layer, r->p, r->first, why, len))
        return false;
    if (plan->sched == PIPE_PIPEDREAM) {
        if (m < r->p)
            return fail(why, len, "pipedream: %d micro-batches are fewer than the %d stages "
                        "(each step must end in a backward)", m, r->p);
        if (tc->model.tied && r->p > 1)
            return fail(why, len, "pipedream needs an untied head (a tied embedding's two "
                        "halves would be updated at different times on the first and the "
                        "last stage)");
        if (tc->loss_scale.mode == LOSS_SCALE_DYNAMIC)
            return fail(why, len, "pipedream needs a static loss scale (a skipped update "
                        "would need every stage to agree on it)");
    }
    const char *refused = plan->zero_level ? zero_check(tc, plan->zero_level) : NULL;
    if (refused)
        return fail(why, len, "%s", refused);
    r->pp = pipe_new_on(r->comm, r->t, plan->sched, m, r->first);
    pipe_set_replicas(r->pp, r->dp);
    if (plan->zero_level)
        pipe_set_zero(r->pp, plan->zero_level);
    return true;
}

DistRun *dist_run_new(const DistRunConfig *cfg, Trainer *t, char *why, size_t len)
{
    DistRun *r = calloc(1, sizeof *r);
    if (!r)
        dist_fail("out of memory");
    r->cfg = *cfg;
    if (r->cfg.micro_batches < 1)
        r->cfg.micro_batches = 1;
    r->t = t;
    r->world = r->comm = dist_world();
    bool ok = true;
    if (cfg->plan.kind == DIST_RUN_PIPELINE) {
        ok = start_pipeline(r, why, len);
    } else if (cfg->plan.kind == DIST_RUN_ZERO) {
        const char *refused = zero_check(&t->cfg, cfg->plan.zero_level);
        ok = !refused || fail(why, len, "%s", refused);
        if (ok) {
            r->zero = zero_new(r->comm, t, cfg->plan.zero_level);
            zero_set_wire(r->zero, cfg->wire);
        }
    } else if (cfg->plan.kind == DIST_RUN_DDP) {
        DdpConfig dc = { .bucket_bytes = (size_t)cfg->bucket_kb * 1024,
                         .overlap = cfg->bucket_kb > 0, .wire = cfg->wire };
        r->ddp = ddp_new(r->comm, t, &dc);
    } else {
        ok = fail(why, len, "no plan: nothing runs on the ranks");
    }
    if (!ok) {
        dist_run_free(r);
        return NULL;
    }
    return r;
}

/* ---- the steps ----------------------------------------------------------------------------- */

static TrainStepResult pipeline_step(DistRun *r, const int *tokens, const int *targets, int B,
                                     int T, double lr)
{
    size_t mine = (size_t)r->replica * r->cfg.micro_batches * B * T;
    TrainStepResult s = pipe_step(r->pp, tokens + mine, targets + mine, B, T, lr);
    /* pipedream: the step's loss is the last stage's (the others' lag behind it) */
    if (r->cfg.plan.sched == PIPE_PIPEDREAM)
        dist_broadcast(r->comm, &s.loss, sizeof s.loss, r->p - 1);
    r->traffic.sent += pipe_bytes_sent(r->pp);
    return s;
}

TrainStepResult dist_run_step(DistRun *r, const int *tokens, const int *targets, int B, int T,
                              double lr)
{
    DistRunTraffic *f = &r->traffic;
    f->steps++;
    if (r->pp)
        return pipeline_step(r, tokens, targets, B, T, lr);
    int K = r->cfg.micro_batches;
    size_t mine = (size_t)r->comm->rank * K * B * T;
    if (r->zero) {
        ZeroStepResult s = zero_step_accum(r->zero, tokens + mine, targets + mine, B, T, K, lr);
        f->grad_sent += s.grad_bytes_sent;
        f->grad_recv += s.grad_bytes_recv;
        f->param_sent += s.param_bytes_sent;
        f->param_recv += s.param_bytes_recv;
        f->sent += s.bytes_sent;
        f->recv += s.bytes_recv;
        f->states[0] = s.param_bytes;
        f->states[1] = s.grad_bytes;
        f->states[2] = s.optim_bytes;
        return s.r;
    }
    if (!r->ddp)
        dist_fail("dist_run_step after dist_run_give_back");
    DdpStepResult s = ddp_step_accum(r->ddp, tokens + mine, targets + mine, B, T, K, lr);
    f->grad_sent += s.grad_bytes_sent;
    f->grad_recv += s.grad_bytes_recv;
    f->sent += s.bytes_sent;
    f->recv += s.bytes_recv;
    if (s.bucket_bytes_peak > f->bucket_peak)
        f->bucket_peak = s.bucket_bytes_peak;
    return s.r;
}

void dist_run_whole_weights(DistRun *r, bool whole)
{
    if (r->pp && whole)
        pipe_share_weights(r->pp);      /* the stages' own training is unaffected */
    if (r->zero && whole)
        zero_gather_weights(r->zero);
    else if (r->zero)
        zero_shard_weights(r->zero);
}

/* ZeRO gives the trainer back as DDP holds it, the pipeline as one process does; DDP's trainer
 * was whole all along (its buckets stay until dist_run_free, for the report). */
void dist_run_give_back(DistRun *r)
{
    if (r->pp)
        pipe_give_back(r->pp);
    r->pp = NULL;
    zero_free(r->zero);
    r->zero = NULL;
}

void dist_run_sum_flops(const DistRun *r, TapeFlops *f)
{
    enum { K = 6 };
    DistComm *c = r->world;
    FlopCount *parts[K / 2] = { &f->forward, &f->backward, &f->recompute };
    int64_t mine[K], *all = calloc((size_t)c->size * K, sizeof *all);
    if (!all)
        dist_fail("out of memory");
    for (int k = 0; k < K / 2; k++) {
        mine[2 * k] = parts[k]->matmul;
        mine[2 * k + 1] = parts[k]->other;
    }
    dist_allgather(c, mine, all, (size_t)c->size * K, sizeof *all);
    for (int k = 0; k < K / 2; k++) {
        parts[k]->matmul = parts[k]->other = 0;
        for (int i = 0; i < c->size; i++) {
            parts[k]->matmul += all[(size_t)i * K + 2 * k];
            parts[k]->other += all[(size_t)i * K + 2 * k + 1];
        }
    }
    free(all);
}

void dist_run_free(DistRun *r)
{
    if (!r)
        return;
    dist_run_give_back(r);
    ddp_free(r->ddp);
    if (r->dp) {
        dist_comm_free(r->dp);
        dist_comm_free(r->comm);
    }
    free(r->first);
    free(r);
}

const DistRunTraffic *dist_run_traffic(const DistRun *r) { return &r->traffic; }
const DistRunConfig *dist_run_config(const DistRun *r) { return &r->cfg; }
DistComm *dist_run_comm(const DistRun *r) { return r->comm; }
DistComm *dist_run_data_group(const DistRun *r) { return r->dp; }
Ddp *dist_run_ddp(const DistRun *r) { return r->ddp; }
Zero *dist_run_zero(const DistRun *r) { return r->zero; }
Pipeline *dist_run_pipeline(const DistRun *r) { return r->pp; }
int dist_run_replica(const DistRun *r) { return r->replica; }

const int *dist_run_stage_split(const DistRun *r, int *p)
{
    *p = r->p;
    return r->first;
}
