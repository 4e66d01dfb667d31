#ifndef TAPEGRAD_NN_GPT_ACTS_H
#define TAPEGRAD_NN_GPT_ACTS_H
/* The GPT's memory plan: every activation a forward pass of nn/gpt.c keeps, in one table
 * (GPT_ACTS in gpt_acts.c, in the order the forward allocates them), with its shape in the
 * letters of the config (B rows, T tokens, C width, V vocabulary, H heads), how it is stored and
 * what backward reads it for. The model keeps exactly these (tests/test_gpt_acts.c records a
 * forward and checks act bytes against the table's sums, part by part and under the precision
 * policies); the memory calculator (plan/memcalc.c) predicts from the same sums.
 *
 * Parts of a forward pass, each kept on a tape of its own under gradient checkpointing:
 *     embed       gpt_embed's tensors
 *     block       one block's tensors, per layer (L of them in a vanilla forward)
 *     checkpoint  a block input x_j kept by the checkpoint runner (autograd/checkpoint.c)
 *     head        gpt_head's tensors and cross-entropy's (gpt_loss)
 *
 * How a row is kept, which decides its bytes under a policy (autograd/tape.c) and which passes
 * keep it:
 *     output        an op's result, a tape tensor: packed in the policy's act dtype when it has
 *                   2 or more elements (4 bytes a value under fp32); a scalar is never packed,
 *                   and where activations are packed it lives in temp, not act. Kept by every
 *                   pass that stores outputs: a recorded one, and the checkpoint runner's
 *                   ADVANCE pass, which does not record (packs_unrecorded).
 *     saved tensor  an extra tape tensor an op saves for its backward: packed as an output is;
 *                   kept only by a recorded pass.
 *     saved f32     a raw tape buffer of floats (tape_buffer): fp32 under any policy; recorded
 *                   passes only.
 *     saved i32     a raw tape buffer of int ids: 4 bytes each; recorded passes only.
 *     saved bytes   a C struct of that many bytes ([24]); recorded passes only.
 * So the strategies keep: vanilla every row of every part once per layer; a block ADVANCE runs
 * (every:K, sqrt, memory-poor) its outputs only, until the next copy is made; a checkpoint its
 * one row. How many of each a strategy holds at once is the runner's schedule (memcalc.c).
 *
 * The plain model only: LoRA adapters (nn/lora.h) keep their own products besides. */
#include <stdbool.h>
#include <stdio.h>

#include "nn/gpt.h"

typedef enum { GPT_ACT_EMBED, GPT_ACT_BLOCK, GPT_ACT_CHECKPOINT, GPT_ACT_HEAD, GPT_ACT_NPARTS }
    GptActPart;

typedef enum {
    GPT_ACT_OUTPUT, GPT_ACT_SAVED_TENSOR, GPT_ACT_SAVED_F32, GPT_ACT_SAVED_I32,
    GPT_ACT_SAVED_BYTES,
} GptActKeep;

/* Rows that belong to one layout only; the others are in every model. */
typedef enum {
    GPT_ACT_ALWAYS, GPT_ACT_IF_FUSED_QKV, GPT_ACT_IF_SEPARATE_QKV, GPT_ACT_IF_STANDARD_ATTN,
    GPT_ACT_IF_TILED_ATTN,
} GptActOnly;

typedef struct {
    const char *name;   /* e.g. "attn.qkv.out" (block rows are per layer: blocks.{l}.) */
    GptActPart  part;
    const char *shape;  /* "[B, T, 3C]": letters of the config, each with an optional count;
                         * a bare count is a constant ("[24]"), "[]" a scalar */
    GptActKeep  keep;
    GptActOnly  only;
    const char *op;     /* the op that allocates it (autograd/ops_*.c) */
    const char *what;   /* what it is, and what reads it */
} GptAct;

extern const GptAct GPT_ACTS[];
extern const int    GPT_N_ACTS;

/* What a forward pass looks like: its batch, the precision policy on its tapes (NULL: fp32) and
 * the attention it runs (gpt_set_tiled_attention). */
typedef struct {
    int                    B, T;
    const PrecisionPolicy *policy;
    bool                   tiled;
} GptActRun;

/* Whether the row is in this model under this run (fused or separate q, k, v; standard or tiled
 * attention). */
bool   gpt_act_applies(const GptAct *a, const GptConfig *cfg, const GptActRun *run);
/* Elements of the row's shape (bytes for GPT_ACT_SAVED_BYTES). A malformed shape string is a
 * programming error (tensor_fatal). */
size_t gpt_act_numel(const GptAct *a, const GptConfig *cfg, int B, int T);
/* Bytes the row takes in the act category under run's policy (0 for a row that does not
 * apply, and for a scalar output where activations are packed: it is in temp). */
double gpt_act_bytes(const GptAct *a, const GptConfig *cfg, const GptActRun *run);

/* The table summed by part, in bytes. */
typedef struct {
    double embed;        /* the embedding's rows */
    double block;        /* one recorded block: all its rows */
    double block_bare;   /* one block run by a pass that does not record: its outputs */
    double copy;         /* one checkpoint x_j */
    double head;         /* ln_f, the logits, cross-entropy */
} GptActBytes;

GptActBytes gpt_acts_bytes(const GptConfig *cfg, const GptActRun *run);
/* What a recorded forward (gpt_loss on one tape) keeps when it returns: embed + L blocks + head,
 * which is also the act peak of a vanilla training step. */
double      gpt_acts_forward_bytes(const GptConfig *cfg, const GptActRun *run);

/* The table as TSV for this model and run: part, name, shape, elements, bytes, keep, op, what;
 * one row per line, the rows that do not apply left out. */
void        gpt_acts_write_tsv(FILE *out, const GptConfig *cfg, const GptActRun *run);

#endif
