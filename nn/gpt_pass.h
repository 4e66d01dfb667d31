#ifndef TAPEGRAD_NN_GPT_PASS_H
#define TAPEGRAD_NN_GPT_PASS_H
/* The GPT's training forward and backward: the one path every training step takes
 * (optim/step.h), whatever the checkpointing strategy, the precision policy and the way the
 * work is spread over ranks. The model is a chain of units,
 *
 *     unit GPT_UNIT_ENDS (embedding)  ->  units 0 .. L-1 (the blocks)  ->  GPT_UNIT_ENDS (head,
 *     loss)
 *
 * where unit l is block l's parameters and GPT_UNIT_ENDS the others (wte, wpe, ln_f, an untied
 * head). A pass covers blocks [lo, hi) and, when it is the model's first part, the embedding,
 * when its last, the head and the loss: the whole model (lo 0, hi L, both ends), or a pipeline
 * stage's share (dist/pipeline.h).
 *
 * The events. A pass tells whoever keeps weights or gradients somewhere else between their uses
 * (the strategies of optim/step.h) when it needs them, in the order it runs:
 *     GPT_UNIT_GATHER       the unit's weights are about to be read;
 *     GPT_UNIT_RELEASE      they will not be read again before the next GATHER;
 *     GPT_UNIT_GRADS_FINAL  the unit's gradients take no more terms this micro-batch: the one
 *                           place where "this gradient is final" is said (DDP sends a bucket,
 *                           ZeRO reduce-scatters a unit).
 * A block raises GATHER and RELEASE around each forward evaluation (recomputations included)
 * and around its backward, which ends with GRADS_FINAL. The ends are gathered once, before their
 * first use, and released after their last read (the head's backward, or the embedding's
 * forward in a pass without a head: the embedding's backward reads no weight); their
 * GRADS_FINAL comes after the last term (the embedding's backward, the last term of a tied
 * wte's gradient; the head's in a pass without the embedding), and GPT_UNIT_HEAD's GRADS_FINAL
 * (ln_f, an untied head) right after the head's backward.
 *
 * How it runs. Vanilla records every unit on the tape it is given (the trainer's: fp8's delayed
 * scaling keeps its amax history there, indexed by the order of what one tape packs) and runs
 * the backward as one walk over that tape, raising the block events at the nodes where one
 * unit's range of nodes ends and the next begins (the tape's after_node hook): the gradients
 * are those of gpt_loss + tape_backward, bit for bit. Every other strategy runs the blocks as a
 * checkpointed chain (autograd/checkpoint.h), the embedding and the head on tapes of their own,
 * all under the given tape's policy: the same ops on the same values, backward in the same
 * order, so the same bits again (docs/checkpointing.md); only the memory held and the number
 * of block forwards differ. fp8's delayed scaling is refused there (checkpoint.h says why).
 *
 * FLOPs: every op of the pass counts into the given tape's counter (tape->flops, if set), a
 * recomputed block's as recompute (tape.h), and into the pass's stats. */
#include "autograd/checkpoint.h"
#include "nn/gpt.h"

/* GPT_UNIT_HEAD is a part of the ends, for GRADS_FINAL only: ln_f and an untied head, whose
 * gradients are final after the head's backward, long before the ends' (a tied wte still
 * takes the embedding's term). A strategy that keeps the ends together waits for the ends'. */
enum { GPT_UNIT_ENDS = -1, GPT_UNIT_HEAD = -2 };
typedef enum { GPT_UNIT_GATHER, GPT_UNIT_RELEASE, GPT_UNIT_GRADS_FINAL } GptUnitEvent;
typedef struct {
    void (*on_unit)(int unit, GptUnitEvent event, void *ctx);   /* NULL: no events */
    /* Optional: called after every node of a vanilla pass's backward (a chain's: none):
     * not a signal of anything, a chance to move messages in flight on (MPI progresses only
     * inside its calls), while the backward computes. */
    void (*tick)(void *ctx);
    /* Optional: one parameter's gradient takes no more terms this micro-batch, raised by a
     * vanilla pass after the lowest node that reads it (before its unit's GRADS_FINAL, which
     * still comes; a chain raises none): finer than a unit, for DDP's buckets. */
    void (*on_param_final)(const Tensor *param, void *ctx);
    void  *ctx;
} GptUnitHooks;

typedef struct {
    int          lo, hi;         /* blocks [lo, hi), 0 <= lo < hi <= L */
    bool         embed, head;    /* the pass starts at the tokens / ends in the loss */
    CkptStrategy strategy;
    GptUnitHooks hooks;
} GptPassConfig;

/* The unit a parameter belongs to, by its name: "blocks.L...." is block L (its LoRA adapters
 * too), the rest GPT_UNIT_ENDS. gpt_final_unit_of is the unit whose GRADS_FINAL comes first
 * for it: the same, but GPT_UNIT_HEAD for ln_f and an untied head. */
int           gpt_unit_of(const Tensor *param);
int           gpt_final_unit_of(const Tensor *param);

/* The whole model under strategy s, no events. */
GptPassConfig gpt_pass_whole(const Gpt *model, CkptStrategy s);

typedef struct GptPass GptPass;

/* A pass over model with cfg, recording (vanilla) or taking its policy and FLOP counter from
 * tape, which must outlive the pass; the caller resets tape after each backward. A pass can be
 * run again and again (a training loop keeps one). An invalid range is a programming error. */
GptPass   *gpt_pass_new(const Gpt *model, const GptPassConfig *cfg, Tape *tape);
void       gpt_pass_free(GptPass *p);
/* One micro-batch's forward. A pass with the embedding starts from tokens [B * T]; one without
 * from x [B, T, C], the previous part's output (its gradient is accumulated into x->grad if
 * x->requires_grad; x must stay alive until the backward returns). A pass with the head returns
 * the mean cross-entropy against targets [B * T] (a scalar tensor); one without returns its
 * output [B, T, C]. Either is valid until the backward returns. */
Tensor    *gpt_pass_forward(GptPass *p, const int *tokens, const int *targets, Tensor *x, int B,
                            int T);
/* Its backward, seeded with seed: the loss's gradient (one float: the loss scaler's S, times
 * 1/K for K accumulated micro-batches) or the output's ([B, T, C], from the next part). */
void       gpt_pass_backward(GptPass *p, const float *seed);
/* Counters of the last forward + backward: forwards counts block forward evaluations; flops
 * every op of the pass, the ends' included (they run forward once: never recomputed). */
CkptStats  gpt_pass_stats(const GptPass *p);

/* One micro-batch through the whole model: forward, and backward seeded with seed; returns the
 * loss (unscaled). Recorded on tape when vanilla (the caller resets it). hooks and stats may be
 * NULL. */
float      gpt_forward_backward(const Gpt *model, Tape *tape, CkptStrategy s, const int *tokens,
                                const int *targets, int B, int T, float seed,
                                const GptUnitHooks *hooks, CkptStats *stats);

#endif
