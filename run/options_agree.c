/* The settings every rank of a --parallel run must share, as text (run/options.h), compared by
 * run/ranks.c after the setup vote (run_ranks_setup_done). MPMD command lines (`mpirun -np 1 prog A
 * : -np 1 prog B`), or a script that passes each host its own flags, can give the ranks
 * different settings. Ranks that disagree on the mode or on the step count enter different
 * collectives and wait for each other forever; ranks that disagree on --lr or --seed run to the
 * end and write numbers no single command line gives. So every rank writes the settings that
 * must agree as "--name\tvalue" lines in table order, rank 0's text is broadcast, and each rank
 * compares it with its own: the lowest rank that differs names the first differing setting with
 * both values, the others leave quietly, every rank exits 1. Rows that are the rank's own
 * business are left out: the threads, the memory budget, outputs only rank 0 writes, the
 * samples printed at the end. Checkpointing is compared (ZeRO-3 gathers weights again for a
 * recomputed block); so is the kernel mode (ranks in different modes would mix gradients of
 * different bits, which no single process reproduces). */
#include <stdio.h>
#include <string.h>

#include "autograd/checkpoint.h"
#include "autograd/kernels.h"
#include "run/options.h"

static bool rank_local(int id)
{
    static const RunFlag local[] = {
        RUN_FLAG_THREADS, RUN_FLAG_MEM_BUDGET, RUN_FLAG_LOG, RUN_FLAG_PLOT, RUN_FLAG_SAVE, RUN_FLAG_SAVE_ADAPTER,
        RUN_FLAG_PIPE_EVENTS, RUN_FLAG_SAMPLE, RUN_FLAG_TEMPERATURE, RUN_FLAG_SAMPLE_SEED, RUN_FLAG_EVAL_EXAMPLES,
    };
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        if ((int)local[i] == id)
            return true;
    return false;
}

/* One setting as its flag would be typed (the custom rows without a format of their own here). */
static void agreed_value(const Setting *s, const RunOptions *o, char *buf, size_t len)
{
    static const char *const modes[] = { "none", "ddp", "zero1", "zero2", "zero3" };
    const RunParallel *par = &o->run.local.parallel;
    char name[64];
    switch (s->id) {
    case RUN_FLAG_PARALLEL: {
        int level = run_parallel_zero(par);
        snprintf(buf, len, "%s", run_parallel_pipeline(par) ? run_parallel_pipeline(par)
                                 : modes[run_parallel_ddp(par) ? 1 : level ? level + 1 : 0]);
        break;
    }
    case RUN_FLAG_KERNELS: snprintf(buf, len, "%s", kernels_name(kernels_mode())); break;
    case RUN_FLAG_CHECKPOINT:
        snprintf(buf, len, "%s", ckpt_name(o->run.cfg.local.checkpoint, name, sizeof name));
        break;
    case RUN_FLAG_LORA_TARGETS: snprintf(buf, len, "%u", (unsigned)o->run.lora.targets); break;
    default: settings_format(s, o, buf, len);
    }
}

/* The text every rank must share: each row's "--name\tvalue\n", then the step a loaded
 * snapshot resumes from. */
size_t run_options_agreed_text(const RunOptions *o, long start_step, char *buf, size_t len)
{
    size_t at = 0;
    char value[SETTINGS_META_VALUE];
    for (int i = 0; i < RUN_OPTIONS_N && at < len; i++) {
        const Setting *s = &RUN_OPTIONS_TABLE[i];
        /* a pipeline's --accum is its --micro-batches (check_pipeline): named so */
        if (!s->name || rank_local(s->id) ||
            (s->id == RUN_FLAG_ACCUM && run_parallel_pipeline(&o->run.local.parallel)))
            continue;
        agreed_value(s, o, value, sizeof value);
        at += (size_t)snprintf(buf + at, len - at, "--%s\t%s\n", s->name, value);
    }
    if (at < len)
        at += (size_t)snprintf(buf + at, len - at, "the snapshot's step\t%ld\n", start_step);
    return at < len ? at : len - 1;
}
