/* lora_finetune's runs: the library's fine-tuning runs (analysis/finetune.h) from the options,
 * with a progress line, and the pretraining's scores printed as they come. */
#include <stdio.h>

#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/lora_finetune/lora_finetune.h"

/* Every loop draws its own progress line: pretraining, then one per run. */
static void watch_begin(void *ctx, long steps)
{
    progress_start(ctx, 0, steps, steps / 4);
}

static void watch_step(void *ctx, long step, double loss, long long tokens, const char *label)
{
    progress_update(ctx, step, loss, tokens, label);
}

static void watch_scores(void *ctx, const char *label, long step, double loss, double val_loss,
                         double exact)
{
    (void)ctx;
    printf("%s step %ld: loss %.4f, validation loss %.4f, exact match %.1f%%\n", label, step,
           loss, val_loss, 100.0 * exact);
    fflush(stdout);
}

static void watch_end(void *ctx)
{
    progress_finish(ctx);
}

static FinetuneWatch watch(Progress *p)
{
    return (FinetuneWatch){ .begin = watch_begin, .step = watch_step, .scores = watch_scores,
                            .end = watch_end, .ctx = p };
}

FinetuneBaseSpec base_spec(const Options *o)
{
    return (FinetuneBaseSpec){
        .task = o->pretrain_task, .layers = o->layers, .heads = o->heads, .embd = o->embd,
        .pretrain = { .lr = o->lr_pretrain, .steps = o->pretrain_steps,
                      .batch = o->pretrain_batch, .decay = o->pretrain_decay, .seed = o->seed,
                      .eval_every = o->pretrain_eval_every, .eval_examples = o->eval_examples },
    };
}

void make_base(const FinetuneBaseSpec *spec, const GptConfig *cfg, const Task *old,
               const char *dir, const char *path)
{
    Progress progress;
    FinetuneWatch w = watch(&progress);
    char err[1024];
    if (!finetune_base_make(spec, cfg, old, &w, dir, path, err, sizeof err))
        cli_die(1, "%s", err);
}

FinetuneResult base_result(const char *base_path, const Task *task, const Task *old,
                           const Options *o)
{
    FinetuneResult r;
    char err[512];
    if (!finetune_base(base_path, task, old, o->eval_examples, &r, err, sizeof err))
        cli_die(1, "%s", err);
    return r;
}

FinetuneResult finetune(const char *base_path, FinetuneMethod method, int rank,
                        const Task *task, const Task *old, const Options *o)
{
    FinetuneConfig c = { .lr_full = o->lr_full, .lr_lora = o->lr_lora, .steps = o->steps,
                         .batch = o->batch, .alpha = o->alpha, .targets = o->targets,
                         .seed = o->seed, .eval_examples = o->eval_examples };
    Progress progress;
    FinetuneWatch w = watch(&progress);
    FinetuneResult r;
    char err[512];
    if (!finetune_run(base_path, method, rank, task, old, &c, &w, &r, err, sizeof err))
        cli_die(1, "%s", err);
    return r;
}
