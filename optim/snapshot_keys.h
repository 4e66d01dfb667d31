#ifndef TAPEGRAD_SNAPSHOT_KEYS_H
#define TAPEGRAD_SNAPSHOT_KEYS_H
/* A training snapshot's metadata keys (the list is in optim/train_snapshot.h) as two tables,
 * one over the trainer's config and one over its counters. A row names a key, the field that
 * keeps it (by offsetof), the field's type, and the range or the names its value must be
 * within. The snapshot is written by walking a table and read back by walking the same table,
 * so each key is written down once; trainer_config_check walks it too.
 *
 * A number's range is its entry of optim/train.h's TRAIN_RANGES, the one train_gpt's flag
 * takes: a value read from a file passes exactly the checks the flag would have, and a refusal
 * names the key ("metadata 'optim.beta1' = 1.5 is out of range [0, 0.9999]"), never an abort.
 *
 * Files saved by an older version lack the keys that came later. snapshot_keys_migrate, the
 * one place that knows the format's history, gives those keys the values the run that saved
 * the file had, so the readers see every file in today's layout. Internal to optim/. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/snapshot.h"
#include "optim/train.h"

typedef enum {
    KEY_DOUBLE,     /* double, "%.17g" (reads back identical), within its range */
    KEY_FLOAT,      /* float > 0, "%.17g": a value no float holds exactly is refused */
    KEY_U64,        /* uint64_t, decimal, within its range */
    KEY_LONG,       /* long, decimal, within its range and [0, LONG_MAX] */
    KEY_INT,        /* int, decimal, within its range and [0, INT_MAX] */
    KEY_BOOL,       /* bool, "true" or "false" */
    KEY_CHOICE,     /* an enum, by the name name(value) */
    KEY_PRESET,     /* a PrecisionPolicy, by its preset's name: the rows after it refine it */
} KeyType;

typedef struct SnapshotKey {
    const char        *key;         /* NULL: range->key */
    KeyType            type;
    size_t             offset;      /* of the field in the table's struct */
    const TrainRange  *range;       /* a number's range, shared with its flag; NULL: the type's */
    const char      *(*name)(int i);            /* CHOICE: the i-th name, NULL past the last */
    bool             (*applies)(const void *s); /* NULL: always; else whether the struct, as
                                                 * read so far, has the key */
    /* A rule beside the range (NULL: none): false with one sentence naming the key in why. */
    bool             (*check)(const struct SnapshotKey *k, const void *s, char *why, size_t len);
} SnapshotKey;

/* The counters a snapshot keeps beside the tensors, gathered from the Trainer, its optimizer,
 * its loss scaler and its tape (train_snapshot.c moves them in and out). */
typedef struct {
    long  step, optim_step;         /* train.step, optim.step */
    float scale;                    /* loss_scale.scale, .growth_tracker, .checks, .skipped */
    long  growth_tracker, checks, skipped;
    bool  delayed;                  /* not a key: fp8 delayed scaling, the one case with an
                                     * amax history (precision.amax_history_*) */
    long  history_slots, history_steps;
} TrainerCounters;

extern const SnapshotKey TRAINER_CONFIG_KEYS[];     /* over TrainerConfig */
extern const int         N_TRAINER_CONFIG_KEYS;
extern const SnapshotKey TRAINER_COUNTER_KEYS[];    /* over TrainerCounters */
extern const int         N_TRAINER_COUNTER_KEYS;

/* A snapshot's metadata as the readers see it: the file's, and for a file saved before some
 * keys existed, the values snapshot_keys_migrate gave them. */
enum { SNAPSHOT_KEYS_MAX_ADDED = 32 };
typedef struct {
    const SnapshotReader *r;
    const char           *path;     /* for messages */
    int                   n_added;
    struct {
        const char *key;
        char        value[64];
    } added[SNAPSHOT_KEYS_MAX_ADDED];
} SnapshotKeyView;

/* r's metadata (opened from path), brought to today's layout. */
void        snapshot_keys_migrate(SnapshotKeyView *v, const SnapshotReader *r, const char *path);
/* The value of key in v, or NULL. */
const char *snapshot_keys_value(const SnapshotKeyView *v, const char *key);

/* Every row of t[0..n) that applies to s, written into w (the writer reports the first
 * failure, as snapshot_add_meta does). */
void        snapshot_keys_write(const SnapshotKey *t, int n, const void *s, SnapshotWriter *w,
                                SnapshotError *err);
/* Every row that applies, read from v into s with its checks; false with "PATH: metadata
 * 'KEY' ..." in err at the first key missing, malformed or out of range. */
bool        snapshot_keys_read(const SnapshotKey *t, int n, const SnapshotKeyView *v, void *s,
                               SnapshotError *err);
/* The same checks on a struct set by code: false with "'KEY' = VALUE ..." in why. */
bool        snapshot_keys_check(const SnapshotKey *t, int n, const void *s, char *why,
                                size_t len);

#endif
