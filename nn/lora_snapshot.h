#ifndef TAPEGRAD_NN_LORA_SNAPSHOT_H
#define TAPEGRAD_NN_LORA_SNAPSHOT_H
/* A LoRA adapter as a safetensors file of its own, apart from its base (which is saved with
 * nn/gpt_snapshot.h, or is any training snapshot): only the adapter tensors, r (in + out) numbers
 * per adapted Linear, so a file is a few percent of the base, or less, and many adapters can
 * share one base.
 *
 * Tensors: every lora_A and lora_B by name ("blocks.0.attn.q.lora_A"), F32, in
 * gpt_lora_params order. F32 whatever the adapters' dtype: an adapter packed under a precision
 * policy is written from the fp32 values its data points at (expose the optimizer's masters
 * first, optim_expose_masters, to save what training holds), or from its packed values when
 * it points at none. Metadata:
 *     format                         "tapegrad-lora-1"
 *     lora.rank, lora.alpha          decimal, and "%.17g" (reads back to the same float)
 *     lora.targets                   "q,v"
 *     lora.qlora                     "true" when trained on the NF4 base
 *     base.vocab_size ... base.fused_qkv    the shape of the base it was trained on
 *
 * Loading goes on top of a base: the base must have exactly the shape recorded in the file,
 * or the load fails with a message naming the first field that differs and describing both
 * shapes; then the tensor names and each tensor's shape are checked. On any failure the model is
 * left as it was, and NULL comes back with one line "PATH: ..." in err. An adapter saved from a
 * QLoRA run quantizes the base when loaded, so it runs on the base it was trained with. */
#include <stdbool.h>

#include "autograd/snapshot.h"
#include "nn/gpt_lora.h"

bool     lora_snapshot_save(const GptLora *lora, const char *path, SnapshotError *err);
/* The lora.* keys alone, for a file of another kind that holds a LoRA run (a training snapshot,
 * optim/train_snapshot.h); and reading them back, checked against the base's shape. */
bool     lora_snapshot_add_config(SnapshotWriter *w, const LoraConfig *cfg, SnapshotError *err);
bool     lora_snapshot_read_config(const SnapshotReader *r, const char *path,
                                   const GptConfig *base, LoraConfig *cfg, SnapshotError *err);
/* The adapter's config and its base's shape, from r opened from path. */
bool     lora_snapshot_config(const SnapshotReader *r, const char *path, LoraConfig *cfg,
                              GptConfig *base, SnapshotError *err);
/* Attaches the file's adapter to model (freezing it, as gpt_lora_new). */
GptLora *lora_snapshot_load(Gpt *model, const char *path, SnapshotError *err);

#endif
