#ifndef TAPEGRAD_DATASET_H
#define TAPEGRAD_DATASET_H
/* One face for the two kinds of data a trainer can use: a built-in task (tasks.h) or a text file
 * (text.h). The trainer asks for rows of length T = dataset_seq_len and never needs to know
 * which kind it has, except for exact-match accuracy, which only tasks define:
 *
 *     Rng rng = rng_new(seed, RNG_STREAM_DATA);        // save rng in a snapshot to resume
 *     dataset_train_batch(ds, &rng, B, tokens, targets);
 *     for (int i = 0; i < dataset_val_count(ds); i += B)
 *         real = dataset_val_batch(ds, i, B, tokens, targets);
 *     if (dataset_task(ds)) ... task_count_exact / task_accuracy_greedy ...
 *
 * Targets are -1 where the loss must not look (task prompts, padding rows). */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/rng.h"
#include "autograd/schema.h"
#include "data/tasks.h"
#include "data/text.h"

typedef struct {
    Task     *task;    /* exactly one of these two is set */
    TextData *text;
} Dataset;

/* Which data a run trains on, as its settings say it (a snapshot keeps them: data.*): a task
 * (task, its size, its answer's digit order) or a text file (path). */
typedef struct {
    const char *task;            /* NULL when path is set */
    int         task_size;       /* 0: the task's default */
    bool        msd_first;
    const char *path;            /* a text file, or NULL */
} DataConfig;

/* DataConfig's settings (autograd/schema.h), keys "data." in a training snapshot: data.kind
 * (task or text, which says which of the other rows apply), data.task, data.task_size,
 * data.msd_first (written "1" / "0", as the first layout did) and data.path. A program writes
 * them (by_program: train_gpt's settings table); a string read from a file points into the
 * file's metadata. The defaults: the task add at its own size. */
extern const Schema DATA_SCHEMA;
DataConfig data_config_default(void);

/* NULL with a message in err on failure (see task_new, text_open). */
Dataset    *dataset_open_task(const TaskSpec *spec, char *err, size_t errlen);
Dataset    *dataset_open_text(const char *path, int T, char *err, size_t errlen);
void        dataset_free(Dataset *ds);

Task       *dataset_task(const Dataset *ds);      /* NULL for text */
int         dataset_vocab_size(const Dataset *ds);
int         dataset_seq_len(const Dataset *ds);
void        dataset_train_batch(const Dataset *ds, Rng *rng, int B, int *tokens, int *targets);
int         dataset_val_count(const Dataset *ds);
int         dataset_val_batch(const Dataset *ds, int first, int B, int *tokens, int *targets);
const char *dataset_decode(const Dataset *ds, const int *tokens, int n, char *buf, size_t len);
/* One line such as "task add (size 3): rows of 12 tokens, vocabulary 40, 1000 validation
 * examples" for the start of a run. */
const char *dataset_describe(const Dataset *ds, char *buf, size_t len);

#endif
