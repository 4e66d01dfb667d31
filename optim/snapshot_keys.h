#ifndef TAPEGRAD_SNAPSHOT_KEYS_H
#define TAPEGRAD_SNAPSHOT_KEYS_H
/* A training snapshot's metadata keys (the list is in optim/train_snapshot.h) over the
 * trainer's config and its counters, as autograd/schema.h tables: TRAINER_SCHEMA (declared in
 * optim/train.h, beside TrainerConfig, with rows that stand for the schemas of the configs
 * inside it, TRAINER_LOCAL_SCHEMA's run-only rows that no snapshot keeps among them) and the counters' schema below. The snapshot is written by walking a table and read back by walking
 * the same table, so each key is written down once; trainer_config_check walks it too, and
 * train_gpt's flags take their ranges from its rows.
 *
 * A value read from a file passes exactly the checks the flag would have, and a refusal names
 * the key ("metadata 'optim.beta1' = 1.5 is out of range [0, 0.9999]"), never an abort.
 *
 * Files saved by an older version lack the keys that came later. snapshot_keys_migrate, the
 * one place that knows the format's history, gives those keys the values the run that saved
 * the file had, so the readers see every file in today's layout. Internal to optim/. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/schema.h"
#include "autograd/snapshot.h"
#include "optim/train.h"

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

extern const Schema TRAINER_COUNTER_SCHEMA;         /* over TrainerCounters */

/* A snapshot's metadata as the readers see it: the file's, and for a file saved before some
 * keys existed, the values snapshot_keys_migrate gave them. */
enum { SNAPSHOT_KEYS_MAX_ADDED = 32 };
typedef struct {
    const SnapshotReader *r;
    const char           *path;     /* for messages */
    int                   n_added;
    struct {
        char key[64];
        char value[64];
    } added[SNAPSHOT_KEYS_MAX_ADDED];
} SnapshotKeyView;

/* r's metadata (opened from path), brought to today's layout. */
void        snapshot_keys_migrate(SnapshotKeyView *v, const SnapshotReader *r, const char *path);
/* The value of key in v (a SnapshotKeyView), or NULL: a SchemaLookup for schema_read. */
const char *snapshot_keys_value(const void *v, const char *key);

#endif
