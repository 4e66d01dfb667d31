#ifndef TAPEGRAD_TRAIN_SNAPSHOT_H
#define TAPEGRAD_TRAIN_SNAPSHOT_H
/* A trainer's whole state in one safetensors file (autograd/snapshot.h), so a run can stop and
 * resume exactly: N steps straight and N/2 + save + load + N/2 give bit-identical losses.
 *
 * Tensors (F32 unless said, in this order):
 *     every model parameter by its name            "wte.weight", "blocks.0.ln1.weight", ...
 *         (under a precision policy with packed parameters: its fp32 master weights, so the
 *         file is an fp32 model to numpy, PyTorch and nn/gpt_snapshot.h; the masters are not
 *         stored a second time as buffers, and loading fills them and repacks the parameters)
 *     every optimizer state tensor by its name     "adamw.m.wte.weight", "sgd.momentum.wte.weight"
 *     every optimizer buffer, 1-D, U8 or F32        "adam8bit.m.wte.weight", "adafactor.row.wte.weight"
 *     under fp8 delayed scaling, once a step has run: "precision.amax_history", the tape's
 *         amax history [stored activations, fp8_window] (autograd/tape.h)
 * Metadata (strings; integers in decimal, doubles in "%.17g" so they read back identical):
 *     format                 "tapegrad-train-1"
 *     model.vocab_size, model.max_seq, model.n_layer, model.n_head, model.n_embd
 *     model.tied, model.fused_qkv                        "true" / "false"
 *     train.seed, train.clip, train.step
 *     train.data_rng.state, train.data_rng.inc           the data RNG, exactly
 *     optim.kind                                         "adamw", "sgd", "adam8bit", "adafactor"
 *     optim.step, optim.weight_decay, optim.decay_rule   ("matrices", "all", "none")
 *     optim.beta1, optim.beta2, optim.eps                adamw, adam8bit
 *     optim.rounding                                     adam8bit: "nearest", "stochastic"
 *     optim.beta1, optim.decay_exponent, optim.eps1, optim.eps2, optim.clip_threshold,
 *     optim.relative_step, optim.scale_parameter, optim.factored       adafactor
 *     optim.momentum, optim.nesterov                     sgd
 *     precision.policy                                   the preset the policy started from
 *     precision.param, precision.act, precision.grad     dtype names ("bf16", "e4m3", ...)
 *     precision.compute, precision.grad_compute          format names
 *     precision.accumulate_low, precision.fp8_scaling ("current", "delayed"), precision.fp8_window
 *     precision.amax_history_slots, precision.amax_history_steps    delayed scaling only: the
 *                            history's rows (0 before the first step) and the tape's count of
 *                            recorded steps, whose remainder by the window is the column the
 *                            next step writes
 *     loss_scale.mode                                    "none", "static", "dynamic"
 *     loss_scale.init_scale, loss_scale.growth_factor, loss_scale.backoff_factor,
 *     loss_scale.growth_interval                         the scaler's config
 *     loss_scale.scale, loss_scale.growth_tracker        its state: S and the clean-step count
 *     loss_scale.checks, loss_scale.skipped              its counters
 * Each key is one row of a schema (autograd/schema.h: GPT_SCHEMA, LORA_SCHEMA, TRAINER_SCHEMA
 * and the counters'), which both save and load walk. A file
 * saved by an older version, without the keys that came later, loads as the run that saved it
 * had them (snapshot_keys_migrate, the one place that knows the format's history).
 * plus whatever the caller adds (train_gpt adds its data and schedule settings under "data."
 * and "schedule.", and its attention under "run.").
 *
 * Loading builds the model the file describes (its config, not the caller's) and then fills
 * it, so a program given --load needs no model flags; checking user flags against the file is
 * the program's job (train_snapshot_config reads the config without building anything). Every
 * check comes before the caller sees a trainer: the format tag, each config entry (present,
 * well-formed, a valid model, every number within the range its flag takes: its schema row's
 * (TRAINER_SCHEMA, GPT_SCHEMA), then trainer_config_check, so that
 * no library check behind it can abort), no string with an escaped NUL, the tensor names (none
 * missing, none unknown), each tensor's dtype and exact shape, every weight finite, the
 * counters and the RNG. A failure returns false or NULL with one message "PATH: ..." in err
 * and leaves nothing behind; the file itself is never written by a load, and a save replaces
 * an earlier file only once the new one is complete on disk.
 *
 * Not saved: per-parameter decay flags changed by hand after the optimizer was made (the decay
 * rule is saved and reapplied), and the tape's nodes and tensors (a snapshot is taken between
 * steps, when there are none). Its fp8 amax history is saved, so a run under delayed scaling
 * resumes with the scales the uninterrupted one would use. */
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

/* A new trainer built from r's config and holding r's state; NULL with the reason in err. A
 * LoRA run's snapshot is refused: it does not hold the base (below). */
Trainer *train_snapshot_load(SnapshotReader *r, const char *path, SnapshotError *err);

/* A LoRA run (trainer_use_lora): the snapshot stores the adapters as the parameters (fp32, the
 * masters under a policy), the optimizer's state over them, and the adapters' config under
 * "lora." (rank, alpha, targets, qlora: nn/lora_snapshot.h's keys); the frozen base is not in
 * it, since it is a file of its own or drawn from the seed. To resume, the caller rebuilds the
 * run as it began: trainer_new with train_snapshot_config's config, the base's weights,
 * trainer_use_lora with the config train_snapshot_lora reads (*has false for a snapshot of
 * a run without LoRA), then train_snapshot_restore reads the adapters, their state and the
 * counters into it. restore checks the LoRA config against the trainer's and works for a run
 * without LoRA too; on failure the trainer is partly overwritten (free it). */
bool     train_snapshot_lora(const SnapshotReader *r, const char *path, const GptConfig *base,
                             LoraConfig *cfg, bool *has, SnapshotError *err);
bool     train_snapshot_restore(Trainer *t, SnapshotReader *r, const char *path,
                                SnapshotError *err);

#endif
