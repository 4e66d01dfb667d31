#ifndef TAPEGRAD_MEMCALC_H
#define TAPEGRAD_MEMCALC_H
/* Where the memory of training goes, by formula: model states (parameters, gradients, optimizer
 * state) for a precision and an optimizer, ZeRO's partitioning of them over data-parallel ranks,
 * and the activations and scratch of our GPT for a checkpointing strategy. examples/
 * memory_calculator prints these; tests/test_memory_calculator.c checks them against the lecture's
 * numbers and against the bytes autograd/mem measures in a real training step.
 *
 * Model states, per parameter (Rajbhandari et al. 2020, "ZeRO"):
 *     fp32      weights 4, gradients 4, optimizer state K
 *     mixed     fp16/bf16 weights 2, gradients 2, and in the optimizer state an fp32 master copy
 *               of the weights (4) plus K: for Adam 2 + 2 + (4 + 8) = 16 bytes per parameter
 *     K         sgd 0, momentum 4, adamw 8 (m and v), adam8bit 2 + 8/2048 (codes and two absmax
 *               floats per block of 2048), adafactor (rows + cols) * 4 per matrix and 4 per vector
 *               element: about 0 per parameter for a large model
 * ZeRO stage 1 partitions the optimizer state over N ranks, stage 2 also the gradients, stage 3
 * also the weights; each rank then holds 1/N of what is partitioned.
 *
 * Activations of our GPT are not derived here: nn/gpt_acts.h declares every tensor a forward
 * pass keeps (name, shape in B T C V H, how it is stored under a precision policy, which passes
 * keep it), and the act formulas below are that table's sums by part. What is the calculator's
 * own is how the checkpointing strategies hold those parts over a step (memcalc.c, next to the
 * formulas): for fp32, a recorded block is 18 N C + 4 N + B H T^2 floats (N = B T). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "autograd/checkpoint.h"
#include "autograd/mem.h"
#include "nn/gpt.h"
#include "nn/gpt_acts.h"

typedef enum { MC_FP32, MC_MIXED, MC_NPRECISIONS } McPrecision;
typedef enum {
    MC_SGD, MC_MOMENTUM, MC_ADAMW, MC_ADAM8BIT, MC_ADAFACTOR, MC_NOPTIMIZERS,
} McOptimizer;

/* "fp32" "mixed"; "sgd" "momentum" "adamw" "adam8bit" "adafactor": NULL-terminated. */
extern const char *const MC_PRECISION_NAMES[];
extern const char *const MC_OPTIMIZER_NAMES[];

/* Bytes of model states. */
typedef struct {
    double param, grad, optim;
} McStates;

double   memcalc_states_total(McStates s);

/* A model known only by its parameter count n: the per-parameter formulas above (adafactor's
 * factored state counted as 0). */
McStates memcalc_states_flat(double n, McPrecision p, McOptimizer o);
/* What one of `ranks` data-parallel ranks holds under ZeRO stage 0 (none) .. 3. */
McStates memcalc_zero(McStates s, int stage, int ranks);
/* ZeRO's stages 0 .. 3 by the paper's names: "baseline", "P_os", "P_os+g", "P_os+g+p". */
extern const char *const MC_ZERO_STAGE_NAMES[4];

/* Our GPT, tensor by tensor in gpt.h's order (a tied head counted once). */
size_t   memcalc_gpt_params(const GptConfig *cfg);
McStates memcalc_gpt_states(const GptConfig *cfg, McPrecision p, McOptimizer o);

/* One training step of our GPT: B rows of T tokens, a strategy over the L blocks (vanilla runs
 * one tape, as gpt_loss does; the others run nn/gpt_pass.h), and the OpenMP threads (the
 * attention backward takes a T x T scratch per thread). */
typedef struct {
    int          B, T;
    CkptStrategy strategy;
    int          threads;
    /* A precision policy (autograd/policy.h) on every tape of the step, as train_gpt
     * --precision puts it; NULL is fp32. */
    const PrecisionPolicy *policy;
    /* Tiled attention in every block (gpt_set_tiled_attention): a recorded block keeps the
     * per-row logsumexp L [B, H, T] (fp32) instead of P [B, H, T, T]. Only the act formulas
     * follow it; the temp formulas are the standard attention's. */
    bool         tiled;
    /* The optimizer offloaded (optim/offload.h, train_gpt --offload optimizer): its masters and
     * state in the host pool, the update there. The device's optim category is then 0 and its
     * temp loses the update's scratch (Adafactor's); the host holds the state and masters, the
     * fp32 parameters' copy under an fp32 parameter format (4 Psi, optim), the gradients (g Psi,
     * grad) and the packed parameters (p Psi, param); each update moves g Psi down and p Psi
     * up (g, p the gradient's and the parameter's bytes per value as stored). */
    bool         offload;
} McRun;

/* The pieces the activation formulas are made of, in bytes: nn/gpt_acts.h's table summed by
 * part (embed, block, block_bare, copy, head). */
typedef GptActBytes McActParts;

McActParts memcalc_act_parts(const GptConfig *cfg, int B, int T);
/* The same under a policy (NULL: fp32): a recorded tensor is stored in the act dtype (2 bytes
 * for bf16/fp16, 1 for fp8), while raw buffers (ids, targets, layernorm statistics, the
 * logsumexp) stay fp32 and the scalar loss moves to temp (the table's "keep" column). */
McActParts memcalc_act_parts_policy(const GptConfig *cfg, int B, int T,
                                    const PrecisionPolicy *policy);
/* The pieces of run: its B, T, policy and attention (standard or tiled). */
McActParts memcalc_act_parts_run(const GptConfig *cfg, const McRun *run);

/* The lecture's activation estimate (ZeRO paper, section on residual states): 12 x hidden x
 * batch x seq x layers values of `bytes` each, the transformer block's outputs counted as 12
 * values of C per token, the attention probabilities and the embedding and head left out. */
double     memcalc_act_zero_paper(const GptConfig *cfg, int B, int T, double bytes);
/* Peak bytes of activations (category act) and of scratch (category temp: activation gradients
 * in the backward pass, attention scratch, the optimizer's scratch). memory-poor, sqrt and every:K
 * are supported; budget:S is not (returns -1). */
double     memcalc_act_peak(const GptConfig *cfg, const McRun *run);
/* The same from the pieces (L blocks, the strategy), for formulas that change a piece. */
double     memcalc_act_peak_parts(const McActParts *a, int L, CkptStrategy strategy);
double     memcalc_temp_peak(const GptConfig *cfg, const McRun *run, McOptimizer o);

/* Predicted peak of every category (and the total, at MEM_ALL, as the sum of the peaks: an
 * upper bound, since they do not all peak at once) for one training step under run->policy:
 * parameters in its param dtype, fp32 gradients, and fp32 master weights in optim when the
 * param dtype is not fp32. */
typedef struct {
    double bytes[MEM_NCAT + 1];
    /* With run->offload: the host pool's param, grad and optim bytes (predicted: what it keeps
     * between steps; measured: its peaks, temp included: a decoded gradient of the update), and
     * the bytes one update moves each way. Zero without offload. */
    double host[MEM_NCAT + 1];
    double to_host, to_device;
} McPeaks;

McPeaks memcalc_predict(const GptConfig *cfg, const McRun *run, McOptimizer o);
/* The model states among a step's peaks (predicted or measured): param, grad and optim. */
McStates memcalc_peaks_states(const McPeaks *p);
/* The same step run for real: build the model (seed), the optimizer (with master weights and
 * packed parameters under a policy, as optim/train.c does), then one forward + backward with
 * the strategy on random tokens and one update; the peak of each category during the step above
 * what was in use before the model was built, as autograd/mem measures it (total: the measured
 * peak of the sum). */
McPeaks memcalc_measure(const GptConfig *cfg, const McRun *run, McOptimizer o, uint64_t seed);
/* The strategies the calculator's tables compare, in their order: vanilla, sqrt, memory-poor. */
enum { MC_NTABLE_STRATEGIES = 3 };
extern const char *const MC_TABLE_STRATEGIES[MC_NTABLE_STRATEGIES];
/* The figure's TSV (memory_calculator --sweep, docs/figures/memory_strategies.png): for L = 1
 * .. layers blocks of cfg's shape and MC_TABLE_STRATEGIES, one row "layers strategy
 * predicted_act measured_act" (bytes, %.0f; measured by memcalc_measure, seed 1, or nan when
 * not measure) under a header line, written to out. */
void    memcalc_sweep_write(FILE *out, const GptConfig *cfg, const McRun *run, McOptimizer o,
                            int layers, bool measure);
/* Optimizer state bytes of one [rows, cols] tensor (a vector: rows 1), as the optimizer's
 * constructor allocates them; adafactor's scratch for it raises *adafactor_scratch (may be
 * NULL). */
double  memcalc_tensor_state(long rows, long cols, McOptimizer o, double *adafactor_scratch);

/* ---- LoRA and QLoRA (memcalc_lora.c) --------------------------------------------------------
 * Fine-tuning a frozen base with adapters (nn/gpt_lora.h, docs/lora.md), as optim/train.h's
 * trainer_new_lora builds it:
 *     param   the frozen base in its dtype: fp32, the policy's param dtype (no master: it is
 *             never updated), or under QLoRA each block weight as NF4 (quant_bytes: 4-bit
 *             codes, a scale per 64 values double-quantized to e4m3 in blocks of 256 with one
 *             fp32 constant each) and the rest (embeddings, LayerNorms, biases) as fp32 or
 *             packed; plus the adapters A [in, r] and B [r, out], fp32 or packed
 *     grad    4 bytes per adapter value, nothing for the base
 *     optim   the optimizer's state for the adapters alone, and their fp32 masters under a
 *             policy that packs parameters
 *     act     the full model's activations plus, per adapted Linear of a block (recorded, or
 *             run without recording under checkpointing), the adapter op's s x A [M, r] and its
 *             output [M, out], in the act dtype
 *     temp    an upper bound: memcalc_temp_peak's (a frozen weight's backward skips dW, so
 *             it holds less) with what the adapters and QLoRA add at the largest product (the
 *             dequantized weight and its bf16 operand copies, the adapter's [M, r] gradient)
 * Rank 0 is full fine-tuning: memcalc_predict. */
typedef struct {
    int      rank;              /* 0: full fine-tuning */
    unsigned targets;           /* LORA_TARGET_* (nn/gpt_lora.h) */
    bool     qlora;
} McLora;

size_t  memcalc_lora_trainable(const GptConfig *cfg, const McLora *lora);
McPeaks memcalc_predict_lora(const GptConfig *cfg, const McRun *run, McOptimizer o,
                             const McLora *lora);
/* An upper bound of the total in use while trainer_new_lora sets the run up (before any step):
 * the model with its fp32 values (under QLoRA without the block weights, which come one at a
 * time), one tensor packed beside its fp32 copy, the adapters; at the end the run's param
 * and optim bytes. */
double  memcalc_lora_setup_peak(const GptConfig *cfg, const PrecisionPolicy *policy,
                                McOptimizer o, const McLora *lora);
/* memcalc_measure for a LoRA run on a random base of cfg's shape (the bytes do not depend on
 * the values): the base packed or quantized, the adapters, their optimizer, one step. */
McPeaks memcalc_measure_lora(const GptConfig *cfg, const McRun *run, McOptimizer o,
                             const McLora *lora, uint64_t seed);

#endif
