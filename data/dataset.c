#include "data/dataset.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Settings ------------------------------------------------------------------------------------ */

DataConfig data_config_default(void) { return (DataConfig){ .task = task_names[0] }; }

static const DataConfig *data(const void *s) { return s; }
static bool is_task(const void *s) { return !data(s)->path; }
static bool is_text(const void *s) { return data(s)->path != NULL; }
static const char *task_name_at(int i) { return task_names[i]; }

/* data.kind is the whole struct's: "text" clears the task and sets a path to be read next
 * (data.path), "task" clears the path (the task's rows follow). */
static void format_kind(const void *field, char *buf, size_t len)
{
    snprintf(buf, len, "%s", is_text(field) ? "text" : "task");
}
static bool parse_kind(const char *text, void *field, char *why, size_t len)
{
    DataConfig *c = field;
    if (strcmp(text, "task") == 0) {
        c->path = NULL;
        if (!c->task)
            c->task = task_names[0];
        return true;
    }
    if (strcmp(text, "text") == 0) {
        c->task = NULL;
        c->path = "";
        return true;
    }
    snprintf(why, len, "not task or text");
    return false;
}

/* A switch written as the first layout wrote the data keys: "1" or "0". */
static void format_01(const void *field, char *buf, size_t len)
{
    snprintf(buf, len, "%d", *(const bool *)field ? 1 : 0);
}
static bool parse_01(const char *text, void *field, char *why, size_t len)
{
    if (strcmp(text, "0") != 0 && strcmp(text, "1") != 0) {
        snprintf(why, len, "not 0 or 1");
        return false;
    }
    *(bool *)field = text[0] == '1';
    return true;
}

/* Only add and sub have digits to write the other way round. */
static bool msd_first_fits(const SchemaRow *r, const void *s, char *why, size_t len)
{
    (void)r;
    const char *task = data(s)->task;
    if (!data(s)->msd_first || (task && (strcmp(task, "add") == 0 || strcmp(task, "sub") == 0)))
        return true;
    snprintf(why, len, "'data.msd_first' is 1 with 'data.task' = %s: only add and sub have it",
             task ? task : "");
    return false;
}

#define DATA(f) offsetof(DataConfig, f)
static const SchemaRow DATA_ROWS[] = {
    { .key = "kind", .type = SCHEMA_CUSTOM, .offset = 0, .size = sizeof(DataConfig),
      .format = format_kind, .parse = parse_kind, .def = "task", .kept = true,
      .help = "task or text: which of the rows below apply" },
    { .key = "task", .type = SCHEMA_STRING, .offset = DATA(task), .name = task_name_at,
      .def = "add", .kept = true, .applies = is_task, .agrees = "data.kind",
      .help = "the built-in task: add, sub, reverse or sort" },
    { .key = "task_size", .type = SCHEMA_INT, .offset = DATA(task_size), .lo = 1,
      .hi = TASK_MAX_SIZE, .zero_unset = true, .def = "0", .kept = true, .applies = is_task,
      .help = "digits or letters of the task, 0 = its own (add, sub 3; reverse, sort 5)" },
    { .key = "msd_first", .type = SCHEMA_CUSTOM, .offset = DATA(msd_first), .size = sizeof(bool),
      .format = format_01, .parse = parse_01, .check = msd_first_fits, .def = "0", .kept = true,
      .applies = is_task, .agrees = "data.task",
      .help = "add, sub: the answer most significant digit first (1) or last (0)" },
    { .key = "path", .type = SCHEMA_STRING, .offset = DATA(path), .kept = true,
      .applies = is_text, .agrees = "data.kind",
      .help = "the text file of a character-level language model" },
};
#undef DATA
const Schema DATA_SCHEMA = { .name = "DataConfig", .rows = DATA_ROWS,
                             .n = sizeof DATA_ROWS / sizeof DATA_ROWS[0], .by_program = true };
