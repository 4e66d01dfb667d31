#include "autograd/policy.h"

#include <math.h>
#include <string.h>

#include "autograd/parallel.h"

static const PrecisionPolicy presets[] = {
    { .name = "fp32", .param = DTYPE_F32, .act = DTYPE_F32, .grad = DTYPE_F32,
      .compute = FMT_FP32, .grad_compute = FMT_FP32 },
    { .name = "tf32", .param = DTYPE_F32, .act = DTYPE_F32, .grad = DTYPE_F32,
      .compute = FMT_TF32, .grad_compute = FMT_TF32 },
    { .name = "bf16", .param = DTYPE_BF16, .act = DTYPE_BF16, .grad = DTYPE_BF16,
      .compute = FMT_BF16, .grad_compute = FMT_BF16 },
    { .name = "fp16", .param = DTYPE_F16, .act = DTYPE_F16, .grad = DTYPE_F16,
      .compute = FMT_FP16, .grad_compute = FMT_FP16 },
    /* The fp8 recipe of Micikevicius et al. 2022: e4m3 forward, e5m2 backward, weights kept
     * in 16 bits between steps. */
    { .name = "fp8", .param = DTYPE_BF16, .act = DTYPE_E4M3, .grad = DTYPE_E5M2,
      .compute = FMT_E4M3, .grad_compute = FMT_E5M2, .fp8_window = 16 },
};

bool policy_preset(const char *name, PrecisionPolicy *out)
{
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
        if (strcmp(presets[i].name, name) == 0) {
            *out = presets[i];
            return true;
        }
    return false;
}

const char *policy_preset_names(void) { return "fp32|tf32|bf16|fp16|fp8"; }

bool policy_is_fp32(const PrecisionPolicy *p)
{
    return p->param == DTYPE_F32 && p->act == DTYPE_F32 && p->grad == DTYPE_F32 &&
           p->compute == FMT_FP32 && p->grad_compute == FMT_FP32 && !p->accumulate_low;
}

bool policy_is_scaled(Format f)
{
    return f == FMT_E4M3 || f == FMT_E5M2;
}

Dtype policy_param_grad_dtype(const PrecisionPolicy *p)
{
    return policy_is_scaled(tensor_dtype_format(p->grad)) ? p->grad : p->param;
}

bool policy_delays_fp8(const PrecisionPolicy *p)
{
    return p && p->fp8_scaling == POLICY_FP8_DELAYED &&
           policy_is_scaled(tensor_dtype_format(p->act));
}

int policy_fp8_window(const PrecisionPolicy *p)
{
    return p->fp8_window > 0 ? p->fp8_window : 1;
}

float policy_fp8_scale(Format f, float amax)
{
    if (!policy_is_scaled(f))
        return 1.0f;
    if (!(amax > 0.0f) || !isfinite(amax))
        return 1.0f;
    float s = fmt_info(f)->max_finite / amax;
    return isfinite(s) && s > 0.0f ? s : 1.0f;
}

float policy_amax(const float *x, size_t n)
{
    float amax = 0.0f;
    bool nan = false;
    #pragma omp parallel for simd reduction(max : amax) reduction(|| : nan) \
        if (par_worth(3.0 * n))
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        nan = nan || a != a;
        amax = a > amax ? a : amax;
    }
    return nan ? NAN : amax;
}

float policy_current_scale(Format f, const float *x, size_t n)
{
    if (!policy_is_scaled(f))
        return 1.0f;
    return policy_fp8_scale(f, policy_amax(x, n));
}

Format policy_operand_format(const PrecisionPolicy *p, const Tensor *t)
{
    if (!p || tensor_dtype_format(t->dtype) == p->compute)
        return FMT_FP32;
    return p->compute;
}

Format policy_grad_operand_format(const PrecisionPolicy *p)
{
    if (!p || tensor_dtype_format(p->grad) == p->grad_compute)
        return FMT_FP32;
    return p->grad_compute;
}

const float *policy_compute_input(Format f, const float *x, size_t n, float **copy)
{
    *copy = NULL;
    if (f == FMT_FP32)
        return x;
    *copy = mem_alloc(MEM_TEMP, n * sizeof(float));
    tensor_round_values(x, *copy, n, f, policy_current_scale(f, x, n));
    return *copy;
}
