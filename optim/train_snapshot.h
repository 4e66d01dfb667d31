#ifndef TAPEGRAD_TRAIN_SNAPSHOT_H
#define TAPEGRAD_TRAIN_SNAPSHOT_H
/* A trainer's whole state in one safetensors file (autograd/snapshot.h), so a run can stop and
 * resume exactly: N steps straight and N/2 + save + load + N/2 give bit-identical losses.
 *
 * Tensors (F32 unless said, in this order):
 *     every model parameter by its name            "wte.weight", "blocks.0.ln1.weight", ...
 *     every optimizer state tensor by its name     "adamw.m.wte.weight", "sgd.momentum.wte.weight"
 *     every optimizer buffer, 1-D, U8 or F32        "adam8bit.m.wte.weight", "adafactor.row.wte.weight"
 * Metadata (strings; integers in decimal, doubles in "%.17g" so they read back identical):
 *     format                 "tapegrad-train-1"
 *     model.vocab_size, model.max_seq, model.n_layer, model.n_head, model.n_embd
 *     model.tied, model.fused_qkv                        "true" / "false"
 *     train.seed, train.clip, train.step
 *     train.data_rng.state, train.data_rng.inc           the data RNG, exactly
 *     optim.kind                                         "adamw", "sgd", "adam8bit", "adafactor"
 *     optim.step, optim.weight_decay, optim.decay_rule   ("matrices", "all", "none")
 *     optim.beta1, optim.beta2, optim.eps                adamw, adam8bit
 *     optim.beta1, optim.decay_exponent, optim.eps1, optim.eps2, optim.clip_threshold,
 *     optim.relative_step, optim.scale_parameter, optim.factored       adafactor
 *     optim.momentum, optim.nesterov                     sgd
 * plus whatever the caller adds (train_gpt adds its data and schedule settings under "data."
 * and "schedule.").
 *
 * Loading builds the model the file describes (its config, not the caller's) and then fills
 * it, so a program given --load needs no model flags; checking user flags against the file is
 * the program's job (train_snapshot_config reads the config without building anything). Every
 * check comes before the caller sees a trainer: the format tag, each config entry (present,
 * well-formed, a valid model), the tensor names (none missing, none unknown), each tensor's
 * dtype and exact shape, the counters and the RNG. A failure returns false or NULL with one
 * message "PATH: ..." in err and leaves nothing behind; the file itself is never written by a
 * load, and a save replaces an earlier file only once the new one is complete on disk.
 *
 * Not saved: per-parameter decay flags changed by hand after the optimizer was made (the decay
 * rule is saved and reapplied), and the tape (a snapshot is taken between steps, when it is
 * empty). */
#include <stdbool.h>

#include "autograd/snapshot.h"
#include "optim/train.h"

/* Writes t's state, plus the caller's metadata keys[i] = values[i] for i < n (n may be 0), to
 * path atomically. Caller keys must not collide with the ones above. */
bool     train_snapshot_save(const Trainer *t, const char *path, const char *const *keys,
                             const char *const *values, int n, SnapshotError *err);

/* The trainer config stored in an open snapshot r (opened from path, which messages name). */
bool     train_snapshot_config(const SnapshotReader *r, const char *path, TrainerConfig *cfg,
                               SnapshotError *err);

/* A new trainer built from r's config and holding r's state; NULL with the reason in err. */
Trainer *train_snapshot_load(SnapshotReader *r, const char *path, SnapshotError *err);

#endif
