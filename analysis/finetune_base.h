#ifndef TAPEGRAD_FINETUNE_BASE_H
#define TAPEGRAD_FINETUNE_BASE_H
/* The base a fine-tuning study starts from, and what its runs add up to (examples/
 * lora_finetune, docs/lora.md; the runs themselves: analysis/finetune.h).
 *
 * A pretrained base is kept in a cache folder under a name made of every setting that decides
 * its weights, so a second study (another rank, another learning rate) starts from the same
 * base without pretraining again. The kernel mode is part of the name, since the two modes sum
 * in different orders and train different bases from the same seed; in the fast mode so is the
 * thread count, which decides how the library splits its sums. The portable mode trains the
 * same base on every count. In: the settings and the tasks; out: a snapshot file (nn/
 * gpt_snapshot.h), and a check that a base fits the tasks; the study's runs in their order, a
 * check that their adapters fit the base, its table's rows as TSV and its headline numbers. */
#include <stdbool.h>
#include <stddef.h>

#include "analysis/finetune.h"
#include "autograd/tsv.h"

/* A base pretrained by the study: its task's name, its shape and its pretraining. */
typedef struct {
    const char      *task;
    int              layers, heads, embd;
    FinetunePretrain pretrain;
} FinetuneBaseSpec;

/* dir/base-TASK-L..-H..-C..-steps..-lr..-DECAY-batch..-seed..-MODE.safetensors into path. */
const char *finetune_base_cache_path(const FinetuneBaseSpec *s, const char *dir, char *path,
                                     size_t len);
/* The shape of the base: TASK_VOCAB, rows as long as the longer of the two tasks', tied
 * embeddings, separate q, k, v (every LoRA target allowed). */
GptConfig   finetune_base_config(const FinetuneBaseSpec *s, const Task *old, const Task *task);
/* A fresh model of cfg (seeded by the pretraining's seed) pretrained on old and saved to path
 * (its folder made if missing). False with the message in err when it cannot be saved. */
bool        finetune_base_make(const FinetuneBaseSpec *s, const GptConfig *cfg, const Task *old,
                               const FinetuneWatch *watch, const char *dir, const char *path,
                               char *err, size_t errlen);

/* The base in path: its shape into *m, and whether it covers both tasks (the vocabulary and
 * the rows of each). False with a message in err: the file cannot be read, or
 * "PATH: V = .., T = .. does not fit tasks OLD and NEW (V .., rows of .. and ..)". */
bool        finetune_base_covers(const char *path, const Task *old, const Task *task,
                                 GptConfig *m, char *err, size_t errlen);

/* The study's runs: which methods (bit m set: FinetuneMethod m; none: the base only), LoRA's
 * ranks and QLoRA's. */
enum { FINETUNE_MAX_RANKS = 8, FINETUNE_MAX_RUNS = FINETUNE_MAX_RANKS + 2 };
typedef struct {
    unsigned methods;
    int      ranks[FINETUNE_MAX_RANKS], n_ranks;
    int      qlora_rank;
} FinetuneRuns;

/* The runs asked for, in the study's order: full fine-tuning, LoRA at each rank as given,
 * QLoRA; into method[] and rank[] (room for FINETUNE_MAX_RUNS; rank 0 for full fine-tuning).
 * Returns their count. */
int         finetune_runs_order(const FinetuneRuns *r, FinetuneMethod *method, int *rank);
/* Whether the adapters fit a base of shape m (lora_config_check) at the largest rank of them
 * all, QLoRA's included, with c's alpha and targets: true when neither LoRA nor QLoRA is asked
 * for. False with the check's message in err. */
bool        finetune_runs_fit(const FinetuneRuns *r, const FinetuneConfig *c, const GptConfig *m,
                              char *err, size_t errlen);

/* The study's table as TSV (lora_finetune --log, the data of its figure): the columns
 * (NULL-terminated), and one result's row, named by finetune_run_name ("base" for the base). A
 * cell that does not apply is left empty, which gnuplot and spreadsheets read as missing: the
 * base's bytes, the base's step time and training loss, the old task without the adapter but
 * for LoRA and QLoRA. False once a write has failed. */
extern const char *const FINETUNE_COLUMNS[];
bool        finetune_write_row(TsvWriter *w, const FinetuneResult *r);

/* The study's headline numbers from its rows: LoRA at r = 8 against full fine-tuning, and the
 * QLoRA base against the same base in fp32. */
typedef struct {
    bool   lora8;               /* both rows there, and full fine-tuning solved something */
    double lora8_trainable;     /* the share of the parameters LoRA r = 8 trains, % */
    double lora8_states;        /* its grad + optim bytes over full fine-tuning's */
    double lora8_accuracy;      /* its exact match on the new task, % of full fine-tuning's */
    bool   qlora;               /* a QLoRA row is there */
    size_t qlora_frozen, qlora_fp32;    /* its frozen base's bytes; the same base in fp32 */
} FinetuneSummary;

FinetuneSummary finetune_summary(const FinetuneResult *res, int n);

#endif
