/* train_gpt --parallel pipeline:{naive,gpipe,1f1b,pipedream} --micro-batches m [--stages LIST]:
 * the checks of its flags (the pipeline is run/ranks_pipeline.c's, its --log and --pipe-events
 * run/logs.c's; docs/pipeline.md). */
#include "examples/common/cli.h"
#include "examples/train_gpt/train_gpt.h"

void pipeline_check_options(Options *o)
{
    if (!run_parallel_pipeline(&o->run.local.parallel))    /* the pipeline flags need it */
        return;
    if (options_given(o, FLAG_ACCUM))
        cli_usage_error("--parallel pipeline accumulates its --micro-batches; leave --accum out");
    if (o->run.lora.rank > 0 || o->run.local.load_base_path)
        cli_usage_error("--parallel pipeline: --lora, --qlora and --load-base are not built (the "
                        "adapters and their base would be cut over the stages)");
    if (o->run.local.plot_path)
        cli_usage_error("--parallel pipeline draws no --plot (see examples/pipeline_parallel)");
    if (o->run.local.parallel.dist.micro_batches < 1)
        o->run.local.parallel.dist.micro_batches = 1;
    /* the schedule's effective batch is batch x m */
    o->run.kept.accum = o->run.local.parallel.dist.micro_batches;
}

/* --load: the snapshot's accumulation (merged into accum) is the pipeline's micro-batch count, so
 * that it goes on with the same batches; a --micro-batches that differs is refused, as --accum
 * would be. A LoRA run's snapshot is refused like --lora. */
void pipeline_check_loaded(Options *o, const char *path)
{
    if (!run_parallel_pipeline(&o->run.local.parallel))
        return;
    if (o->run.lora.rank > 0)
        cli_usage_error("--parallel pipeline: --load %s is a LoRA run's snapshot; LoRA is not "
                        "built under a pipeline", path);
    int *m = &o->run.local.parallel.dist.micro_batches;
    if (options_given(o, FLAG_MICRO_BATCHES) && *m != o->run.kept.accum)
        cli_usage_error("--micro-batches %d does not match the snapshot %s, which accumulates %d "
                        "micro-batches a step (leave --micro-batches out to continue it)",
                        o->run.local.parallel.dist.micro_batches, path, o->run.kept.accum);
    o->run.local.parallel.dist.micro_batches = o->run.kept.accum;
}
