/* A run's --offload optimizer in its report (optim/offload.h): the host pool's peak bytes, the
 * bytes each update moved each way, and the formula they should equal. */
#include <stdio.h>

#include "optim/offload.h"
#include "run/run.h"

/* Bytes per value of a dtype as stored (tensor_bytes of one element). */
static size_t value_bytes(Dtype d) { return fmt_packed_bytes(tensor_dtype_format(d), 1); }

void run_offload_report(const Trainer *tr)
{
    if (!tr->optim || !optim_is_offloaded(tr->optim))
        return;
    const Optim *o = tr->optim;
    OptimOffloadTraffic t = optim_offload_traffic(o);
    size_t psi = 0;
    for (int i = 0; i < o->n; i++)
        psi += o->params[i]->size;
    /* Every parameter of a GPT is a matrix or a vector of 2 or more: its gradient is stored
     * in the policy's gradient dtype, or in fp32 under --parallel ddp (its buckets take fp32:
     * optim_keep_fp32_grads), the same for all. */
    size_t g = value_bytes(o->params[0]->grad_dtype);
    size_t p = value_bytes(tr->cfg.policy.param);
    char a[32], b[32], c[32];
    printf("offload: the optimizer's masters and state on the host, the update there "
           "(optim/offload.h)\n");
    printf("  host pool, peak bytes: param %zu, grad %zu, optim %zu, total %zu (%s)\n",
           mem_host_peak(MEM_PARAM), mem_host_peak(MEM_GRAD), mem_host_peak(MEM_OPTIM),
           mem_host_peak(MEM_ALL), mem_format_bytes(mem_host_peak(MEM_ALL), a, sizeof a));
    printf("  per update: %zu bytes down (gradients, %s), %zu bytes up (parameters, %s); "
           "formula %zu x Psi = %zu and %zu x Psi = %zu, Psi = %zu\n",
           t.to_host, mem_format_bytes(t.to_host, b, sizeof b), t.to_device,
           mem_format_bytes(t.to_device, c, sizeof c), g, g * psi, p, p * psi, psi);
    printf("  %ld updates: %zu bytes down, %zu up; set-up %zu bytes down\n", t.updates,
           t.to_host_total, t.to_device_total, t.sync);
}
