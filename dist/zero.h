#ifndef TAPEGRAD_ZERO_H
#define TAPEGRAD_ZERO_H
/* ZeRO (Rajbhandari et al. 2020) and FSDP: data parallel training in which the N ranks stop
 * keeping N copies of the model states. Each parameter tensor's values are cut into N shards
 * (dist/comm.h's rule: rank r owns [dist_shard_begin(n, N, r), dist_shard_begin(n, N, r + 1)))
 * and rank r keeps, for its shard only, at each level (the paper's "stages"; in tapegrad a stage
 * is a pipeline's, dist/pipeline.h):
 *
 *     level 1   the optimizer state and the fp32 masters            params, grads whole
 *     level 2   + the gradients (reduced straight into the shard)   params whole
 *     level 3   + the weights (FSDP): a unit's weights are gathered just before each use and
 *               freed right after; a unit is one block, or the ends (wte, wpe, ln_f, head)
 *
 * so with Psi values and K bytes of optimizer state per value (mixed-precision Adam: weights 2,
 * gradients 2, masters and moments 12), a rank holds (2 + 2 + 12/N) Psi, (2 + (2 + 12)/N) Psi
 * and 16 Psi / N bytes: the ZeRO paper's table, and memcalc_zero's. A shard is a whole number of
 * values, so ranks hold at most one value per tensor more than Psi / N.
 *
 * One step, on every rank (its own micro-batch of B rows, loss / N, backward seeded with S):
 *
 *     forward, backward     the GPT pass (nn/gpt_pass.h): any --checkpoint
 *                           strategy; level 3 gathers each unit's weights around each use
 *     reduce-scatter        each gradient summed in rank order into its owner's shard: at the
 *                           end of backward (level 1), or as each unit's gradients become final,
 *                           after which the whole gradient is freed (levels 2, 3)
 *     unscale, check        on the shard; inf or NaN anywhere skips the step everywhere
 *     clip                  the global norm: each rank's sum of squares over its shards, summed
 *                           over the ranks in rank order
 *     update                the optimizer on the shards alone
 *     all-gather            levels 1 and 2: the updated shards, in the parameter format, so
 *                           every rank holds the whole model again; level 3 gathers later
 *
 * Same numbers as DDP (dist/ddp.h): the gradient sums are the same rank-ordered additions, the
 * update rules of AdamW and SGD are elementwise, and packing a shard of masters gives the codes
 * packing the whole would, so parameters are bit for bit those of ddp_step. Two differences,
 * stated where they arise: the gradient norm is the square root of a sum of per-rank double
 * sums, not one serial double sum, so it can differ from DDP's in the last bits of the double
 * (the float clipping factor made from it is the same unless it falls within one double ulp of
 * a rounding boundary); and 8-bit Adam quantizes blocks of 2048 values of each shard (and keeps
 * a shard under 4096 values in fp32), so its blocks, and its numbers, differ from DDP's.
 * Adafactor is refused: its factored second moment needs whole rows and columns. A parameter
 * format with a per-tensor scale (fp8) is refused: a shard cannot see the tensor's amax.
 *
 * Traffic per step, counted by the communicator, in values: reduce-scatter Psi (N-1)/N per rank,
 * each all-gather Psi (N-1)/N. Stages 1, 2: one of each, the paper's 2 Psi (N-1)/N. Stage 3: a
 * block is gathered for its forward and again for its backward (and again for each
 * recomputation a checkpointing strategy makes), the ends once, since the head's forward and
 * backward run back to back and the embedding's backward reads no weight: with vanilla,
 * (3 Psi_blocks + 2 Psi_ends)(N-1)/N, the paper's 3 Psi (N-1)/N less the ends' second gather.
 * Gradients travel on the wire zero_set_wire chose (fp32 4 bytes by default, bf16 2, e5m2 1 and
 * a scale per message), weights in the parameter format (2 bytes under bf16).
 * The loss and the norm add N-1 doubles each way, the skip check one int. */
#include "dist/comm.h"
#include "optim/step.h"
#include "optim/train.h"

typedef struct {
    TrainStepResult r;           /* loss: the mean over the ranks; grad_norm: global */
    uint64_t grad_bytes_sent, grad_bytes_recv;      /* the gradients' reduce-scatters */
    uint64_t param_bytes_sent, param_bytes_recv;    /* the weights' all-gathers */
    uint64_t bytes_sent, bytes_recv;                /* everything this step, this rank */
    /* Model states this rank held when the update ran (autograd/mem.h's current bytes): what
     * the ZeRO formulas predict. The step's peaks (gathered units, whole gradients before their
     * reduction) are mem_peak's. */
    size_t   param_bytes, grad_bytes, optim_bytes;
} ZeroStepResult;

typedef struct Zero Zero;

/* Takes over the trainer's optimizer: replaces it by one of the same kind over this rank's
 * shards (initialised from the trainer's weights, masters and optimizer state: a trainer loaded
 * from any snapshot, on any rank count, is resharded here) and, for level 3, frees all but the
 * shard of every weight. Collective over c; every rank must have built the trainer from the same
 * config. Refusals (Adafactor, a scaled parameter format, fp8's delayed scaling, LoRA, resuming
 * 8-bit Adam) end every rank with dist_fail: check with zero_check first. */
Zero          *zero_new(DistComm *c, Trainer *t, int level);
/* Gives the trainer back whole, on every rank: the weights, the masters and the optimizer state
 * all-gathered into an ordinary optimizer (the one DDP would hold, bit for bit), so it can be
 * evaluated, saved with train_snapshot_save (one file, whatever the rank count) or trained on.
 * 8-bit Adam's state is not gathered (its blocks follow the shards): it comes back zero.
 * Collective. NULL is allowed. */
void           zero_free(Zero *z);
/* The gradients' reduce-scatter on wire w from the next step on (dist/wire.h; fp32 until
 * then): each rank's term rounded as the wire rounds it, the shard's sum kept in fp32. The
 * weights' all-gathers already travel in the parameter format (2 bytes under bf16). */
void           zero_set_wire(Zero *z, DistWire w);
/* The step's callbacks (optim/step.h), for a strategy that runs ZeRO inside its own: the
 * pipeline shards each stage's optimizer over the stage's data-parallel group with them
 * (dist/pipeline.h, pipe_set_zero). */
const StepStrategy *zero_step_strategy(const Zero *z);
/* NULL when the trainer's config can run under ZeRO, else the reason, one sentence. */
const char    *zero_check(const TrainerConfig *cfg, int level);

size_t         zero_param_count(const Zero *z);       /* Psi */
size_t         zero_shard_values(const Zero *z);      /* the values this rank owns */

/* One step: tokens and targets are this rank's micro-batch [B * T]. Collective over c. */
ZeroStepResult zero_step(Zero *z, const int *tokens, const int *targets, int B, int T,
                         double lr);
/* The same with K micro-batches per rank (tokens [K * B * T], each loss / (N K)). Stage 1
 * accumulates the K on the rank and reduces once: ddp_step_accum's bits. Stages 2 and 3 keep no
 * whole gradient between micro-batches, so each unit's gradients are reduce-scattered after
 * every micro-batch and added into the shard: K times the gradient traffic, and the sum taken
 * over the ranks first, then over the micro-batches, which DDP adds the other way round (equal
 * to float rounding, not to the bit). */
ZeroStepResult zero_step_accum(Zero *z, const int *tokens, const int *targets, int B, int T,
                               int K, double lr);

/* Stage 3: every weight whole on every rank (for an evaluation, a sample, a snapshot), and
 * back to shards. No-ops for levels 1 and 2, whose weights are always whole. Collective. */
void           zero_gather_weights(Zero *z);
void           zero_shard_weights(Zero *z);

#endif
