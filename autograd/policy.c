#include "autograd/policy.h"

#include <math.h>
#include <stdio.h>
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

/* The schema ------------------------------------------------------------------------------------ */

static const char *dtype_name(int i)
{
    return i >= 0 && i < DTYPE_COUNT ? tensor_dtype_name((Dtype)i) : NULL;
}
static const char *format_name(int i)
{
    return i >= 0 && i < FMT_COUNT ? fmt_name((Format)i) : NULL;
}
static const char *fp8_scaling_name(int i)
{
    static const char *const names[] = { "current", "delayed" };
    return i >= 0 && i < 2 ? names[i] : NULL;
}
/* The whole policy by its preset's name: the rows after it refine it. */
static void format_preset(const void *field, char *buf, size_t len)
{
    snprintf(buf, len, "%s", ((const PrecisionPolicy *)field)->name);
}
static bool parse_preset(const char *text, void *field, char *why, size_t len)
{
    if (policy_preset(text, field))
        return true;
    snprintf(why, len, "not %s", policy_preset_names());
    return false;
}

#define POLICY(f) offsetof(PrecisionPolicy, f)
static const SchemaRow POLICY_ROWS[] = {
    { .key = "policy", .type = SCHEMA_CUSTOM, .offset = 0, .size = sizeof(PrecisionPolicy),
      .format = format_preset, .parse = parse_preset, .def = "fp32", .kept = true,
      .help = "the precision preset the run started from" },
    { .key = "param", .type = SCHEMA_CHOICE, .offset = POLICY(param), .name = dtype_name,
      .def = "fp32", .kept = true, .agrees = "precision.policy",
      .help = "the dtype parameters are stored in" },
    { .key = "act", .type = SCHEMA_CHOICE, .offset = POLICY(act), .name = dtype_name,
      .def = "fp32", .kept = true, .agrees = "precision.policy",
      .help = "the dtype activations are stored in" },
    { .key = "grad", .type = SCHEMA_CHOICE, .offset = POLICY(grad), .name = dtype_name,
      .def = "fp32", .kept = true, .agrees = "precision.policy",
      .help = "the dtype gradients are stored in" },
    { .key = "compute", .type = SCHEMA_CHOICE, .offset = POLICY(compute), .name = format_name,
      .def = "fp32", .kept = true, .agrees = "precision.policy",
      .help = "what a forward product rounds its inputs to" },
    { .key = "grad_compute", .type = SCHEMA_CHOICE, .offset = POLICY(grad_compute),
      .name = format_name, .def = "fp32", .kept = true, .agrees = "precision.policy",
      .help = "what a backward product rounds its inputs to" },
    { .key = "accumulate_low", .type = SCHEMA_BOOL, .offset = POLICY(accumulate_low),
      .def = "false", .kept = true, .agrees = "precision.policy",
      .help = "sums rounded to the compute format" },
    { .key = "fp8_scaling", .type = SCHEMA_CHOICE, .offset = POLICY(fp8_scaling),
      .name = fp8_scaling_name, .def = "current", .kept = true,
      .agrees = "precision.policy (delayed needs fp8 activations)",
      .help = "an fp8 tensor's scale from its own amax or the last steps'" },
    { .key = "fp8_window", .type = SCHEMA_INT, .offset = POLICY(fp8_window), .lo = 0.0,
      .hi = POLICY_FP8_MAX_WINDOW, .def = "0", .kept = true,
      .help = "delayed scaling's window of steps, 0 = the preset's" },
};
#undef POLICY
const Schema POLICY_SCHEMA = { .name = "PrecisionPolicy", .rows = POLICY_ROWS,
                               .n = sizeof POLICY_ROWS / sizeof POLICY_ROWS[0] };
