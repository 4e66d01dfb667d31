#ifndef TAPEGRAD_NN_GPT_SNAPSHOT_H
#define TAPEGRAD_NN_GPT_SNAPSHOT_H
/* A model's weights alone, as a safetensors file (autograd/snapshot.h): the base a fine-tuning
 * run starts from, without the optimizer state a training snapshot carries.
 *
 * Tensors: every parameter by its name ("wte.weight", "blocks.0.attn.q.weight", ...), F32, in
 * gpt_params order. Metadata:
 *     format                                               "tapegrad-model-1"
 *     model.vocab_size, model.max_seq, model.n_layer, model.n_head, model.n_embd   (decimal)
 *     model.tied, model.fused_qkv                          "true" / "false"
 * The model.* keys are those of a training snapshot (optim/train_snapshot.h), so loading a base
 * also accepts a snapshot written by train_gpt --save: its optimizer tensors and its other
 * metadata are ignored; every parameter must be there with its exact shape.
 *
 * The config helpers take a key prefix, so a LoRA adapter file (nn/lora_snapshot.h) records the
 * shape of its base under "base." with the same code. Failures return false (or NULL) with one
 * line "PATH: ..." in err, as everywhere in autograd/snapshot.h. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/snapshot.h"
#include "nn/gpt.h"

/* "<prefix>.vocab_size" ... "<prefix>.fused_qkv" into w. */
bool gpt_snapshot_add_config(SnapshotWriter *w, const char *prefix, const GptConfig *cfg,
                             SnapshotError *err);
/* The same keys read back from r (opened from path) and checked with gpt_config_check. */
bool gpt_snapshot_read_config(const SnapshotReader *r, const char *path, const char *prefix,
                              GptConfig *cfg, SnapshotError *err);
/* "V=40 T=12 L=2 H=4 C=128, tied head, separate q/k/v" into buf. */
const char *gpt_config_describe(const GptConfig *cfg, char *buf, size_t len);
/* The first field in which a and b differ, as "n_embd (C) 64 against 128"; NULL when equal. */
const char *gpt_config_diff(const GptConfig *a, const GptConfig *b, char *buf, size_t len);

/* "PATH: message" into err (when err is not NULL); returns false. For the snapshot code of nn/
 * (autograd's own helper, snapshot_fail, is internal to autograd/snapshot*.c). */
bool gpt_snapshot_fail(SnapshotError *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Every one of the n values finite, or false with "PATH: tensor 'NAME' holds nan at element
 * I ..." in err: a model whose weights are NaN or inf computes nothing meaningful, so loading
 * refuses it (a trainer never writes one: a step with an inf or NaN gradient is skipped). */
bool gpt_snapshot_check_finite(const char *path, const char *name, const float *values,
                               size_t n, SnapshotError *err);

/* Writes the weights and the config, atomically. Every parameter must hold fp32 data (a QLoRA
 * model, whose weights are NF4, cannot be saved as a base). */
bool gpt_snapshot_save(const Gpt *model, const char *path, SnapshotError *err);
/* A new model with the file's config and weights; NULL with the reason in err. */
Gpt *gpt_snapshot_load(const char *path, SnapshotError *err);
/* The file's weights into an existing model, whose config must be the file's (a message names
 * the first field that differs); the model is unchanged unless every weight is read. */
bool gpt_snapshot_read_weights(Gpt *model, const char *path, SnapshotError *err);

#endif
