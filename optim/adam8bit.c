#include "optim/adam8bit.h"

#include <math.h>
#include <stdlib.h>

/* The largest block the update can decode on the stack: 2 x 4 x 8192 bytes = 64 KiB. */
enum { MAX_BLOCK = 8192 };

const char *const ADAM8BIT_ROUNDING_NAMES[] = { "nearest", "stochastic", NULL };

Adam8bitConfig adam8bit_defaults(void)
{
    return (Adam8bitConfig){ .adam = adamw_defaults(), .block = 2048, .min_8bit = 4096,
                             .rounding = ADAM8BIT_ROUND_NEAREST, .seed = 0 };
}

const char *adam8bit_rounding_name(Adam8bitRounding r)
{
    return (unsigned)r < ADAM8BIT_ROUND_COUNT ? ADAM8BIT_ROUNDING_NAMES[r] : "?";
}

bool adam8bit_is_quantized(const Adam8bit *a, int i)
{
    return a->base.params[i]->size >= a->cfg.min_8bit;
}

/* Parameter i's buffers: fp32 m and v, or codes and per-block absmax values. */
typedef struct {
    float   *m, *v;             /* fp32 moments (small parameters) */
    uint8_t *mq, *vq;           /* codes (8-bit parameters) */
    float   *m_absmax, *v_absmax;
} State;

/* Buffers are added parameter by parameter, 4 for an 8-bit one and 2 otherwise, so parameter i's
 * come after those of the parameters before it. */
static State param_state(const Adam8bit *a, int i)
{
    int k = 0;
    for (int j = 0; j < i; j++)
        k += adam8bit_is_quantized(a, j) ? 4 : 2;
    OptimBuffer *b = a->base.bufs + k;
    State s = { 0 };
    if (adam8bit_is_quantized(a, i)) {
        s.mq = b[0].data;
        s.vq = b[1].data;
        s.m_absmax = b[2].data;
        s.v_absmax = b[3].data;
    } else {
        s.m = b[0].data;
        s.v = b[1].data;
    }
    return s;
}

/* AdamW's rule (adamw.h) on n elements with fp32 moments m and v, updated in place. */
static void update_span(const AdamWStep *s, float shrink, float *w, const float *grad, float *m,
                        float *v, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        float g = grad[j];
        w[j] *= shrink;
        m[j] = s->b1 * m[j] + s->one_minus_b1 * g;
        v[j] = s->b2 * v[j] + s->one_minus_b2 * g * g;
        float denom = sqrtf(v[j]) / s->bc2_sqrt + s->eps;
        w[j] -= s->step_size * (m[j] / denom);
    }
}

/* One block of a moment into codes; returns its absmax. Stochastic rounding draws element j's
 * bits from (stream, j), j counted from the parameter's first element, so the result does not
 * depend on which thread encodes the block. */
static float encode_block(const Adam8bit *a, const QdynCode *code, const float *x, size_t len,
                          uint64_t stream, size_t first, uint8_t *codes)
{
    if (a->cfg.rounding == ADAM8BIT_ROUND_STOCHASTIC)
        return qdyn_quantize_block_stochastic(code, x, len, stream, first, codes);
    return qdyn_quantize_block(code, x, len, codes);
}

/* Decode, update, encode: each block on its own, so blocks run in parallel. Parameter i's m and
 * v get their own random streams at every step. */
static void update_quantized(const Adam8bit *a, const AdamWStep *s, float shrink, Tensor *p,
                             const float *grad, const State *st, int i)
{
    uint64_t t = (uint64_t)a->base.step;
    uint64_t stream_m = qdyn_stream_seed(a->cfg.seed, t, 2 * (uint64_t)i);
    uint64_t stream_v = qdyn_stream_seed(a->cfg.seed, t, 2 * (uint64_t)i + 1);
    size_t n = p->size, block = a->cfg.block;
    long nblocks = (long)((n + block - 1) / block);
#pragma omp parallel for schedule(static) if (n >= OPTIM_PARALLEL_MIN)
    for (long b = 0; b < nblocks; b++) {
        float m[MAX_BLOCK], v[MAX_BLOCK];
        size_t first = (size_t)b * block, len = n - first < block ? n - first : block;
        qdyn_dequantize_block(&a->code_m, st->mq + first, len, st->m_absmax[b], m);
        qdyn_dequantize_block(&a->code_v, st->vq + first, len, st->v_absmax[b], v);
        update_span(s, shrink, p->data + first, grad + first, m, v, len);
        st->m_absmax[b] = encode_block(a, &a->code_m, m, len, stream_m, first, st->mq + first);
        st->v_absmax[b] = encode_block(a, &a->code_v, v, len, stream_v, first, st->vq + first);
    }
}

static void update_fp32(const AdamWStep *s, float shrink, Tensor *p, const float *grad,
                        const State *st)
{
    update_span(s, shrink, p->data, grad, st->m, st->v, p->size);
}

static void adam8bit_update(Optim *o, double lr)
{
    const Adam8bit *a = (const Adam8bit *)o;
    AdamWStep s = adamw_step_constants(&a->cfg.adam, lr, o->step);
    for (int i = 0; i < o->n; i++) {
        Tensor *p = o->params[i];
        if (!tensor_has_grad(p))
            continue;
        float shrink = o->decay[i] ? s.shrink_decayed : 1.0f;
        State st = param_state(a, i);
        float *scratch;     /* a packed gradient's fp32 values, for this tensor's update */
        const float *grad = tensor_grad_read(p, &scratch);
        if (st.mq)
            update_quantized(a, &s, shrink, p, grad, &st, i);
        else
            update_fp32(&s, shrink, p, grad, &st);
        mem_free(scratch);
    }
}

void adam8bit_moments(const Adam8bit *a, int i, float *m, float *v)
{
    State st = param_state(a, i);
    size_t n = a->base.params[i]->size;
    if (st.mq) {
        qdyn_dequantize(&a->code_m, st.mq, n, a->cfg.block, st.m_absmax, m);
        qdyn_dequantize(&a->code_v, st.vq, n, a->cfg.block, st.v_absmax, v);
        return;
    }
    for (size_t j = 0; j < n; j++) {
        m[j] = st.m[j];
        v[j] = st.v[j];
    }
}

Adam8bit *adam8bit_new(Tensor *const *params, int n, Adam8bitConfig cfg)
{
    const AdamWConfig *c = &cfg.adam;
    if (!(c->beta1 >= 0.0 && c->beta1 < 1.0 && c->beta2 >= 0.0 && c->beta2 < 1.0))
        tensor_fatal("adam8bit: betas (%g, %g) must be in [0, 1)", c->beta1, c->beta2);
    if ((unsigned)cfg.rounding >= ADAM8BIT_ROUND_COUNT)
        tensor_fatal("adam8bit: rounding %d is not nearest or stochastic", (int)cfg.rounding);
    if (cfg.block < 1 || cfg.block > MAX_BLOCK)
        tensor_fatal("adam8bit: block %zu must be in [1, %d]", cfg.block, MAX_BLOCK);
    Adam8bit *a = calloc(1, sizeof *a);
    if (!a)
        tensor_fatal("out of memory for an optimizer");
    a->cfg = cfg;
    qdyn_code_init(&a->code_m, true);
    qdyn_code_init(&a->code_v, false);
    optim_init(&a->base, "adam8bit", params, n, c->decay_rule, 0, NULL, adam8bit_update);
    for (int i = 0; i < n; i++) {
        size_t size = params[i]->size, nblocks = (size + cfg.block - 1) / cfg.block;
        if (!adam8bit_is_quantized(a, i)) {
            optim_add_buffer(&a->base, i, "m", OPTIM_BUF_F32, size);
            optim_add_buffer(&a->base, i, "v", OPTIM_BUF_F32, size);
            continue;
        }
        /* Zero-filled bytes are not the signed code of 0 (that is 127): set it. The unsigned
         * zero is code 0, and absmax 0 decodes every code to 0 anyway. */
        uint8_t *mq = optim_add_buffer(&a->base, i, "m", OPTIM_BUF_U8, size);
        for (size_t j = 0; j < size; j++)
            mq[j] = qdyn_zero_code(&a->code_m);
        optim_add_buffer(&a->base, i, "v", OPTIM_BUF_U8, size);
        optim_add_buffer(&a->base, i, "m_absmax", OPTIM_BUF_F32, nblocks);
        optim_add_buffer(&a->base, i, "v_absmax", OPTIM_BUF_F32, nblocks);
    }
    return a;
}
