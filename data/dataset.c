#include "data/dataset.h"

#include <stdio.h>
#include <stdlib.h>

#include "autograd/tensor.h"

static Dataset *wrap(Task *task, TextData *text)
{
    if (!task && !text)
        return NULL;
    Dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        tensor_fatal("out of memory for a dataset");
    ds->task = task;
    ds->text = text;
    return ds;
}

Dataset *dataset_open_task(const TaskSpec *spec, char *err, size_t errlen)
{
    return wrap(task_new(spec, err, errlen), NULL);
}

Dataset *dataset_open_text(const char *path, int T, char *err, size_t errlen)
{
    return wrap(NULL, text_open(path, T, err, errlen));
}

void dataset_free(Dataset *ds)
{
    if (!ds)
        return;
    task_free(ds->task);
    text_free(ds->text);
    free(ds);
}

Task *dataset_task(const Dataset *ds) { return ds->task; }

int dataset_vocab_size(const Dataset *ds)
{
    return ds->task ? task_vocab_size(ds->task) : text_vocab_size(ds->text);
}

int dataset_seq_len(const Dataset *ds)
{
    return ds->task ? task_seq_len(ds->task) : text_seq_len(ds->text);
}

void dataset_train_batch(const Dataset *ds, Rng *rng, int B, int *tokens, int *targets)
{
    if (ds->task)
        task_train_batch(ds->task, rng, B, tokens, targets);
    else
        text_train_batch(ds->text, rng, B, tokens, targets);
}

int dataset_val_count(const Dataset *ds)
{
    return ds->task ? task_val_count(ds->task) : text_val_count(ds->text);
}

int dataset_val_batch(const Dataset *ds, int first, int B, int *tokens, int *targets)
{
    return ds->task ? task_val_batch(ds->task, first, B, tokens, targets)
                    : text_val_batch(ds->text, first, B, tokens, targets);
}

const char *dataset_decode(const Dataset *ds, const int *tokens, int n, char *buf, size_t len)
{
    return ds->task ? task_decode(tokens, n, buf, len)
                    : text_decode(ds->text, tokens, n, buf, len);
}

const char *dataset_describe(const Dataset *ds, char *buf, size_t len)
{
    if (ds->task)
        snprintf(buf, len, "task %s (size %d): rows of %d tokens, vocabulary %d, "
                 "%d validation examples", task_name(ds->task), task_size(ds->task),
                 task_seq_len(ds->task), TASK_VOCAB, task_val_count(ds->task));
    else
        snprintf(buf, len, "text: %zu training and %zu validation bytes, rows of %d tokens, "
                 "vocabulary %d, %d validation windows", text_train_len(ds->text),
                 text_val_len(ds->text), text_seq_len(ds->text), text_vocab_size(ds->text),
                 text_val_count(ds->text));
    return buf;
}
