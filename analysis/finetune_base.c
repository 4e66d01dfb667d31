/* The base of a fine-tuning study, its runs, its table's rows and its headline numbers
 * (finetune_base.h). */
#include "analysis/finetune_base.h"

#include <math.h>
#include <stdio.h>
#include <sys/stat.h>

#include "autograd/kernels.h"
#include "autograd/parallel.h"
#include "nn/gpt_lora.h"
#include "nn/gpt_snapshot.h"
#include "optim/schedule.h"

const char *finetune_base_cache_path(const FinetuneBaseSpec *s, const char *dir, char *path,
                                     size_t len)
{
    char mode[32];
    if (kernels_mode() == KERNELS_PORTABLE)
        snprintf(mode, sizeof mode, "portable");
    else
        snprintf(mode, sizeof mode, "threads%d-fast", par_threads());
    const FinetunePretrain *p = &s->pretrain;
    snprintf(path, len, "%s/base-%s-L%d-H%d-C%d-steps%ld-lr%g-%s-batch%d-seed%ld-%s.safetensors",
             dir, s->task, s->layers, s->heads, s->embd, p->steps, p->lr,
             SCHED_DECAY_NAMES[p->decay], p->batch, p->seed, mode);
    return path;
}

GptConfig finetune_base_config(const FinetuneBaseSpec *s, const Task *old, const Task *task)
{
    int T = task_seq_len(old) > task_seq_len(task) ? task_seq_len(old) : task_seq_len(task);
    return (GptConfig){ .vocab_size = TASK_VOCAB, .max_seq = T, .n_layer = s->layers,
                        .n_head = s->heads, .n_embd = s->embd, .tied = true,
                        .fused_qkv = false };
}

bool finetune_base_make(const FinetuneBaseSpec *s, const GptConfig *cfg, const Task *old,
                        const FinetuneWatch *watch, const char *dir, const char *path,
                        char *err, size_t errlen)
{
    Gpt *m = gpt_new(cfg, (uint64_t)s->pretrain.seed);
    finetune_pretrain(m, old, &s->pretrain, watch);
    mkdir(dir, 0777);       /* an existing folder is fine; a real failure shows below */
    SnapshotError serr;
    bool ok = gpt_snapshot_save(m, path, &serr);
    if (!ok)
        snprintf(err, errlen, "%s", serr.message);
    gpt_free(m);
    return ok;
}

bool finetune_base_covers(const char *path, const Task *old, const Task *task, GptConfig *m,
                          char *err, size_t errlen)
{
    SnapshotReader *r;
    SnapshotError serr;
    bool read = (r = snapshot_open(path, &serr)) &&
                gpt_snapshot_read_config(r, path, "model", m, &serr);
    if (r)
        snapshot_close(r);
    if (!read) {
        snprintf(err, errlen, "%s", serr.message);
        return false;
    }
    if (m->vocab_size < TASK_VOCAB || m->max_seq < task_seq_len(task) ||
        m->max_seq < task_seq_len(old)) {
        snprintf(err, errlen, "%s: V = %d, T = %d does not fit tasks %s and %s (V %d, rows of %d "
                 "and %d)", path, m->vocab_size, m->max_seq, task_name(old), task_name(task),
                 TASK_VOCAB, task_seq_len(old), task_seq_len(task));
        return false;
    }
    return true;
}

int finetune_runs_order(const FinetuneRuns *r, FinetuneMethod *method, int *rank)
{
    int n = 0;
    for (int i = -1; i <= r->n_ranks; i++) {
        FinetuneMethod m = i < 0 ? FINETUNE_FULL : i < r->n_ranks ? FINETUNE_LORA : FINETUNE_QLORA;
        if (r->methods & (1u << m)) {
            method[n] = m;
            rank[n++] = i < 0 ? 0 : i < r->n_ranks ? r->ranks[i] : r->qlora_rank;
        }
    }
    return n;
}

bool finetune_runs_fit(const FinetuneRuns *r, const FinetuneConfig *c, const GptConfig *m,
                       char *err, size_t errlen)
{
    LoraConfig lc = { .rank = r->qlora_rank, .alpha = (float)c->alpha, .targets = c->targets };
    for (int i = 0; i < r->n_ranks; i++)
        lc.rank = r->ranks[i] > lc.rank ? r->ranks[i] : lc.rank;
    bool adapters = r->methods & ((1u << FINETUNE_LORA) | (1u << FINETUNE_QLORA));
    return !adapters || lora_config_check(&lc, m, err, errlen);
}

const char *const FINETUNE_COLUMNS[] = {
    "run", "method", "rank", "params", "trainable", "trainable_pct", "peak_param", "peak_grad",
    "peak_optim", "peak_act", "peak_temp", "frozen_bytes", "frozen_ratio", "ms_per_step",
    "final_loss", "acc_new", "acc_old", "loss_old", "acc_old_off", NULL,
};

bool finetune_write_row(TsvWriter *w, const FinetuneResult *r)
{
    char run[32];
    tsv_str(w, finetune_run_name(r->method, r->rank, run, sizeof run));
    tsv_str(w, finetune_method_name(r->method));
    tsv_int(w, r->rank);
    tsv_int(w, (long long)r->params);
    tsv_int(w, (long long)r->trainable);
    tsv_num(w, 100.0 * (double)r->trainable / (double)r->params);
    bool base = r->method == FINETUNE_BASE;
    for (int k = 0; k < MEM_NCAT; k++)
        tsv_num_or_empty(w, base ? NAN : (double)r->peak[k]);
    tsv_num_or_empty(w, base ? NAN : (double)r->frozen_bytes);
    tsv_num_or_empty(w, base ? NAN : (double)r->frozen_bytes / (double)r->base_fp32_bytes);
    tsv_num_or_empty(w, r->ms_per_step);
    tsv_num_or_empty(w, r->final_loss);
    tsv_num(w, r->acc_new);
    tsv_num(w, r->acc_old);
    tsv_num(w, r->loss_old);
    tsv_num_or_empty(w, r->acc_old_off);
    return tsv_end_row(w);
}

FinetuneSummary finetune_summary(const FinetuneResult *res, int n)
{
    const FinetuneResult *full = NULL, *lora8 = NULL, *qlora = NULL;
    for (int i = 0; i < n; i++) {
        if (res[i].method == FINETUNE_FULL)
            full = &res[i];
        if (res[i].method == FINETUNE_LORA && res[i].rank == 8)
            lora8 = &res[i];
        if (res[i].method == FINETUNE_QLORA)
            qlora = &res[i];
    }
    FinetuneSummary s = { .lora8 = full && lora8 && full->acc_new > 0.0, .qlora = qlora };
    if (s.lora8) {
        s.lora8_trainable = 100.0 * (double)lora8->trainable / (double)lora8->params;
        s.lora8_states = (double)(lora8->peak[MEM_GRAD] + lora8->peak[MEM_OPTIM]) /
                         (double)(full->peak[MEM_GRAD] + full->peak[MEM_OPTIM]);
        s.lora8_accuracy = 100.0 * lora8->acc_new / full->acc_new;
    }
    if (qlora) {
        s.qlora_frozen = qlora->frozen_bytes;
        s.qlora_fp32 = qlora->base_fp32_bytes;
    }
    return s;
}
