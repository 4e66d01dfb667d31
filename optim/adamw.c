#include "optim/adamw.h"

#include <math.h>
#include <stdlib.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

AdamWConfig adamw_defaults(void)
{
    return (AdamWConfig){ .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01,
                          .decay_rule = OPTIM_DECAY_MATRICES };
}

AdamWStep adamw_step_constants(const AdamWConfig *c, double lr, long t)
{
    return (AdamWStep){
        .b1 = (float)c->beta1, .one_minus_b1 = (float)(1.0 - c->beta1),
        .b2 = (float)c->beta2, .one_minus_b2 = (float)(1.0 - c->beta2),
        .eps = (float)c->eps,
        .step_size = (float)(lr / (1.0 - pow(c->beta1, (double)t))),
        .bc2_sqrt = (float)sqrt(1.0 - pow(c->beta2, (double)t)),
        .shrink_decayed = (float)(1.0 - lr * c->weight_decay),
    };
}

/* The rule in adamw.h for element j; shrink = 1 - lr wd (1 where no decay). The definition: the
 * vector loop below repeats it operation for operation. */
static inline void adamw_element(const AdamWStep *s, float shrink, float *w, float *m, float *v,
                                 const float *grad, long j)
{
    /* BEGIN SOLUTION adamw_step */
    float g = grad[j];
    w[j] *= shrink;
    m[j] = s->b1 * m[j] + s->one_minus_b1 * g;
    v[j] = s->b2 * v[j] + s->one_minus_b2 * g * g;
    float denom = sqrtf(v[j]) / s->bc2_sqrt + s->eps;
    w[j] -= s->step_size * (m[j] / denom);
    /* STUDENT
    (void)s, (void)shrink, (void)w, (void)m, (void)v, (void)grad, (void)j;
    */
    /* END SOLUTION adamw_step */
}

#ifdef __AVX512F__
/* Elements [0, n - n % 16) of the arrays, 16 at a time, with the operations of adamw_element in
 * the same order, each rounded once (no fused multiply-add: the scalar code is compiled without
 * contraction, -std=c11), so both give the same bits. Returns how many it did. Intrinsics,
 * because the compiler does not vectorize a loop calling sqrtf, which may set errno (C's
 * default, -fmath-errno); one scalar sqrt and two divisions per element made the update 80% of
 * an optimizer step. Built when the compiler targets AVX-512 (-march=native on such a CPU). */
static long adamw_vector(const AdamWStep *s, float shrink, float *w, float *m, float *v,
                         const float *grad, long n)
{
    /* BEGIN SOLUTION adamw_step */
    const __m512 b1 = _mm512_set1_ps(s->b1), c1 = _mm512_set1_ps(s->one_minus_b1);
    const __m512 b2 = _mm512_set1_ps(s->b2), c2 = _mm512_set1_ps(s->one_minus_b2);
    const __m512 eps = _mm512_set1_ps(s->eps), bc2_sqrt = _mm512_set1_ps(s->bc2_sqrt);
    const __m512 step_size = _mm512_set1_ps(s->step_size), shr = _mm512_set1_ps(shrink);
    long j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 g = _mm512_loadu_ps(grad + j);
        __m512 wj = _mm512_mul_ps(_mm512_loadu_ps(w + j), shr);
        __m512 mj = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + j)), _mm512_mul_ps(c1, g));
        __m512 vj = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + j)),
                                  _mm512_mul_ps(_mm512_mul_ps(c2, g), g));
        __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vj), bc2_sqrt), eps);
        wj = _mm512_sub_ps(wj, _mm512_mul_ps(step_size, _mm512_div_ps(mj, denom)));
        _mm512_storeu_ps(m + j, mj);
        _mm512_storeu_ps(v + j, vj);
        _mm512_storeu_ps(w + j, wj);
    }
    return j;
    /* STUDENT
    (void)s, (void)shrink, (void)w, (void)m, (void)v, (void)grad, (void)n;
    return 0;
    */
    /* END SOLUTION adamw_step */
}
#else
static long adamw_vector(const AdamWStep *s, float shrink, float *w, float *m, float *v,
                         const float *grad, long n)
{
    (void)s, (void)shrink, (void)w, (void)m, (void)v, (void)grad, (void)n;
    return 0;
}
#endif

/* The rule for one tensor, in blocks of ADAMW_BLOCK elements spread over the threads: each
 * block runs the vector loop, then adamw_element on what is left. */
enum { ADAMW_BLOCK = 4096 };

static void adamw_update_tensor(const AdamWStep *s, float shrink, Tensor *p, const float *grad,
                                float *m, float *v)
{
    float *w = p->data;
    long n = (long)p->size, blocks = (n + ADAMW_BLOCK - 1) / ADAMW_BLOCK;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PARALLEL_MIN)
    for (long b = 0; b < blocks; b++) {
        long j0 = b * ADAMW_BLOCK, j1 = j0 + ADAMW_BLOCK < n ? j0 + ADAMW_BLOCK : n;
        long j = j0 + adamw_vector(s, shrink, w + j0, m + j0, v + j0, grad + j0, j1 - j0);
        for (; j < j1; j++)
            adamw_element(s, shrink, w, m, v, grad, j);
    }
}

static void adamw_update(Optim *o, double lr)
{
    AdamWStep s = adamw_step_constants(&((AdamW *)o)->cfg, lr, o->step);
    for (int i = 0; i < o->n; i++) {
        if (!tensor_has_grad(o->params[i]))
            continue;
        float shrink = o->decay[i] ? s.shrink_decayed : 1.0f;
        float *scratch;     /* a packed gradient's fp32 values, for this tensor's update */
        const float *grad = tensor_grad_read(o->params[i], &scratch);
        adamw_update_tensor(&s, shrink, o->params[i], grad, o->state[2 * i]->data,
                            o->state[2 * i + 1]->data);
        mem_free(scratch);
    }
}

AdamW *adamw_new(Tensor *const *params, int n, AdamWConfig cfg)
{
    if (!(cfg.beta1 >= 0.0 && cfg.beta1 < 1.0 && cfg.beta2 >= 0.0 && cfg.beta2 < 1.0))
        tensor_fatal("adamw: betas (%g, %g) must be in [0, 1)", cfg.beta1, cfg.beta2);
    AdamW *a = calloc(1, sizeof *a);
    if (!a)
        tensor_fatal("out of memory for an optimizer");
    a->cfg = cfg;
    const char *slots[] = { "m", "v" };
    optim_init(&a->base, "adamw", params, n, cfg.decay_rule, 2, slots, adamw_update);
    return a;
}
