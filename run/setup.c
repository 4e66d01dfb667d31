/* Assembling a run (run/run.h): its data from its settings, the model checked against the data
 * and against the machine, the trainer (fresh, on a base, or a snapshot's), the outputs checked
 * before any training, the schedule the settings describe, and the snapshot at the end. */
#include <stdio.h>
#include <unistd.h>

#include "autograd/outfile.h"
#include "optim/train_snapshot.h"
#include "run/run.h"

Dataset *run_open_data(DataConfig *data, int *seq)
{
    char err[512];
    Dataset *ds;
    if (data->path) {
        if (*seq == 0)
            *seq = RUN_TEXT_DEFAULT_SEQ;
        ds = dataset_open_text(data->path, *seq, err, sizeof err);
    } else {
        TaskSpec spec = { .name = data->task, .size = data->task_size, .n_val = 0,
                          .answer_msd_first = data->msd_first };
        ds = dataset_open_task(&spec, err, sizeof err);
    }
    if (!ds)
        run_fail(1, "%s", err);
    if (dataset_task(ds)) {
        int rows = dataset_seq_len(ds);
        data->task_size = task_size(dataset_task(ds));
        if (*seq == 0)
            *seq = rows;
        if (*seq != rows)
            run_fail(2, "--seq %d does not fit task %s (size %d): its examples are %d tokens, "
                     "so every row is %d (leave --seq out)", *seq, data->task, data->task_size,
                     rows + 1, rows);
    }
    return ds;
}

void run_check_fit(int seq, const Dataset *ds, const GptConfig *m)
{
    if (m->vocab_size < dataset_vocab_size(ds))
        run_fail(1, "the model's vocabulary (V = %d) is smaller than the data's (%d tokens)",
                 m->vocab_size, dataset_vocab_size(ds));
    if (seq > m->max_seq)
        run_fail(1, "rows of %d tokens are longer than the model's T = %d", seq, m->max_seq);
}

/* Building a model whose fp32 weights alone exceed the machine's memory would end in an
 * allocator's abort or the kernel's OOM killer. */
void run_check_model_size(const GptConfig *m)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double params = (double)gpt_config_n_params(m), memory = (double)pages * (double)page;
    if (pages > 0 && page > 0 && 4.0 * params > memory)
        run_fail(1, "the model (V=%d T=%d L=%d C=%d) has %.4g parameters: its fp32 weights alone "
                 "need %.3g GB, more than the %.3g GB of memory this machine has", m->vocab_size,
                 m->max_seq, m->n_layer, m->n_embd, params, 4e-9 * params, 1e-9 * memory);
}

TrainerConfig run_snapshot_settings(const char *path, SnapshotReader **reader)
{
    SnapshotError err;
    TrainerConfig saved;
    *reader = snapshot_open(path, &err);
    if (!*reader || !train_snapshot_config(*reader, path, &saved, &err))
        run_fail(1, "%s", err.message);
    return saved;
}

Trainer *run_trainer_resume(SnapshotReader *r, const TrainerConfig *saved,
                            const RunSettings *s)
{
    SnapshotError err;
    Trainer *tr = s->lora.rank > 0
        ? run_lora_resume(saved, &s->lora, s->cfg.seed, s->local.load_base_path, r,
                          s->local.load_path)
        : train_snapshot_load(r, s->local.load_path, &err);
    if (!tr)
        run_fail(1, "%s", err.message);
    /* The run's own TrainerLocal, which no snapshot holds (it changes no number); offload also
     * moves the state of the optimizer just loaded to the host. */
    tr->cfg.local = s->cfg.local;
    if (tr->cfg.local.offload != TRAIN_OFFLOAD_NONE)
        trainer_offload(tr);
    /* the snapshot's (run.attention) */
    gpt_set_tiled_attention(tr->model, s->kept.attention == RUN_ATTENTION_TILED);
    /* As run_lora_setup does for a fresh run: the parameters were made fp32 and then packed
     * (under a policy); that transient copy is not the run's. */
    mem_reset_peaks();
    return tr;
}

Trainer *run_trainer_fresh(const RunSettings *s, const Dataset *ds)
{
    TrainerConfig cfg = s->cfg;
    cfg.model.vocab_size = dataset_vocab_size(ds);
    cfg.model.max_seq = s->kept.seq;
    if (s->local.load_base_path)
        run_lora_base_config(s->local.load_base_path, &cfg.model);
    run_check_fit(s->kept.seq, ds, &cfg.model);
    run_check_model_size(&cfg.model);
    Trainer *tr = run_lora_trainer_new(&cfg, &s->lora, s->cfg.seed, s->local.load_base_path);
    gpt_set_tiled_attention(tr->model, s->kept.attention == RUN_ATTENTION_TILED);
    return tr;
}

/* A run must not train for an hour and then find that it cannot save (a missing folder, a
 * folder given as the file), or block at its first log row on a FIFO nobody reads. */
void run_check_outputs(const RunLocal *l)
{
    const struct { const char *flag, *path; } outputs[] = {
        { "--save", l->save_path }, { "--save-adapter", l->save_adapter_path },
        { "--plot", l->plot_path }, { "--log", l->log_path },
        { "--pipe-events", l->parallel.pipe_events },
    };
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        char err[512];
        if (outputs[i].path && (!outfile_check_kind(outputs[i].path, err, sizeof err) ||
                                !outfile_check_writable(outputs[i].path, err, sizeof err)))
            run_fail(1, "%s %s", outputs[i].flag, err);
    }
}

/* S is --steps for a decaying schedule; a constant one only needs S to cover the warmup, so a
 * resumed run may extend --steps without changing the rate of any step (a cosine or wsd curve
 * is defined by --steps, and stretches with it instead). */
SchedConfig run_schedule(const SchedConfig *given, const RunKept *kept, int ranks)
{
    SchedConfig c = *given;
    c.batch = kept->batch;
    c.accum = kept->accum * ranks;        /* the effective batch: every rank's micro-batches */
    if (c.base_batch == 0)
        c.base_batch = kept->batch * c.accum;
    if (c.warmup_steps == 0)
        c.warmup = SCHED_WARMUP_NONE;
    if (c.decay != SCHED_DECAY_WSD)
        c.cooldown_steps = 0;           /* only wsd cools down */
    else if (c.cooldown_steps == 0)
        c.cooldown_steps = kept->steps >= 5 ? kept->steps / 5 : 1;
    long needed = (c.warmup == SCHED_WARMUP_NONE ? 0 : c.warmup_steps) + c.cooldown_steps;
    c.total_steps = c.decay == SCHED_DECAY_CONSTANT ? 1 : kept->steps;
    if (c.total_steps < needed)
        c.total_steps = needed;
    if (c.total_steps < 1)
        c.total_steps = 1;
    return c;
}

void run_save(const Trainer *tr, const char *path, const char *const *keys,
              const char *const *values, int n)
{
    SnapshotError err;
    if (!train_snapshot_save(tr, path, keys, values, n, &err))
        run_fail(1, "%s", err.message);
    printf("snapshot: %s (step %ld)\n", path, tr->step);
}
