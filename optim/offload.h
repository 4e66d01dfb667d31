#ifndef TAPEGRAD_OFFLOAD_H
#define TAPEGRAD_OFFLOAD_H
/* Optimizer offload, as ZeRO-Offload does it (Ren et al. 2021): the fp32 master weights and the
 * optimizer state live in the host pool (autograd/mem.h), outside the device's budget and its
 * caching model, and the update runs there. The device keeps what the forward and backward
 * need: the parameters in their format, their gradients, the activations.
 *
 * One update (optim_step on an offloaded optimizer), for every parameter with a gradient:
 *     down   its gradient, as stored (fp32; bf16 or fp16 under those policies, e5m2 under fp8:
 *            the packed gradients of autograd/tensor.h), into a host buffer of its own:
 *            g Psi bytes, g the gradient format's bytes (4, 2 or 1)
 *     update the optimizer's rule on the host: the masters (fp32; under an fp32 policy a host
 *            copy of the fp32 parameters, the same numbers), the state and every scratch buffer
 *            the rule asks for (decoded gradients) in the host pool
 *     up     the new values encoded into the parameter format on the host (one rounding, as
 *            optim_pack_masters does on the device), then those bytes into the parameter:
 *            p Psi bytes, p the parameter format's bytes (4 for fp32, 2 for bf16, 1 for fp8)
 * so 2 Psi each way under bf16 (ZeRO-Offload's 2 Psi down and 2 Psi up with fp16), 4 Psi
 * each way under fp32. The per-tensor numbers beside the bytes (an fp8 scale, the pending
 * factors 1/S and the clip coefficient of a packed gradient) are fields of the Tensor, as the
 * host keeps the shapes and pointers in a real system; they are not counted. The unscaling,
 * the inf/NaN check, the norm and the clipping stay where the gradients are (optim/step.c's
 * tail, on the device), so the update reads the same numbers bit for bit: an offloaded run
 * equals the run without offload to the bit, with the device's optim bytes moved to the host.
 *
 * Each direction is moved by mem_transfer, which counts it (mem_stats().to_host_bytes,
 * to_device_bytes); optim_offload_traffic gives the last update's.
 *
 * Use (optim/train.c's trainer_new_optimizer does it for a trainer):
 *     unsigned old = mem_host_categories(1u << MEM_OPTIM);   // state and masters on the host
 *     Optim *o = adamw_new(params, n, cfg);
 *     optim_use_policy(o, &policy);
 *     optim_offload(o);
 *     mem_host_categories(old);
 * Host pool, per parameter: the state and masters as without offload (adamw 8 + 4 under a low
 * parameter format), the host copy of the fp32 parameters under fp32 (4, category optim), the
 * gradient buffer (g, category grad) and, for a packed parameter, its encoded values (p,
 * category param): 16 Psi for AdamW under fp32 and under bf16. */
#include <stddef.h>

#include "optim/optim.h"

typedef struct {
    size_t to_host, to_device;      /* the last update's bytes, each way */
    size_t to_host_total, to_device_total;   /* every update's */
    size_t sync;                    /* device to host outside updates: state moved by
                                     * optim_offload, the fp32 copies taken */
    long   updates;
} OptimOffloadTraffic;

/* o's updates run on the host from now on: the host's gradient buffers and parameter copies
 * are made here. State and masters made in the host pool (under mem_host_categories(1u <<
 * MEM_OPTIM)) stay; any on the device are moved (a resumed run's: counted in sync, and the
 * device held them for a while, which a budget sees). */
void                optim_offload(Optim *o);
bool                optim_is_offloaded(const Optim *o);
/* Bytes moved by o's updates (zeros if o is not offloaded). */
OptimOffloadTraffic optim_offload_traffic(const Optim *o);
/* For code that wrote fp32 parameters on the device (a snapshot read): the host copies are
 * taken again before the next update. Nothing without offload or under a packed format (the
 * masters are the values then, and they live on the host). */
void                optim_offload_resync(Optim *o);

/* For optim.c: the offloaded update (optim_step's body) and the host buffers' release. */
void                optim_offload_step(Optim *o, double lr);
void                optim_offload_free(Optim *o);

#endif
