/* 8-bit Adam and its dynamic code: the code tables (256 ascending levels, exact 0 and 1, the
 * decade structure), nearest-level search against a linear scan, blockwise quantization error
 * bounds (and the dynamic code against linear int8 on values spread over decades), 8-bit Adam
 * against fp32 AdamW on a quadratic over 100 steps with either rounding, the first moment that
 * nearest rounding leaves stuck and stochastic rounding does not, the state's bytes (at most
 * 0.26 x AdamW's), names, types, restoring state, thread-count independence, and the rounding
 * kept in a trainer's snapshot. (Stochastic rounding itself: test_quant_dynamic.c.) */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "optim/adam8bit.h"
#include "optim/adamw.h"
#include "optim/train_snapshot.h"
#include "precision/quant.h"
#include "precision/quant_dynamic.h"

/* ---- the code tables ------------------------------------------------------------------------ */

/* Levels in (10^-e / 10, 10^-e] of one sign, for e = 0 .. 6: 2^(6-e) signed, 2^(7-e) unsigned
 * (the paper's bit layout), plus the level 1 itself in decade 0. */
static void check_decades(const QdynCode *c, int bits_e0)
{
    for (int e = 0; e < 7; e++) {
        double hi = pow(10.0, -e), lo = hi / 10.0;
        int count = 0;
        for (int k = 0; k < QDYN_LEVELS; k++)
            count += c->level[k] > lo && c->level[k] < hi;
        assert_int_equal(count, 1 << (bits_e0 - e));
    }
}

static void test_code_tables(void **state)
{
    (void)state;
    QdynCode s, u;
    qdyn_code_init(&s, true);
    qdyn_code_init(&u, false);
    for (int k = 0; k + 1 < QDYN_LEVELS; k++) {
        assert_true(s.level[k] < s.level[k + 1]);
        assert_true(u.level[k] < u.level[k + 1]);
        assert_true(s.level[k] < s.mid[k] && s.mid[k] < s.level[k + 1]);
    }
    assert_true(s.level[127] == 0.0f && qdyn_zero_code(&s) == 127);
    assert_true(u.level[0] == 0.0f && qdyn_zero_code(&u) == 0);
    assert_true(s.level[255] == 1.0f && u.level[255] == 1.0f);
    /* The end levels by hand: 0.1 + 63.5 * 0.9 / 64, and 0.1 + 127.5 * 0.9 / 128. */
    assert_true(s.level[0] == (float)-0.99296875);
    assert_true(u.level[254] == (float)0.996484375);
    /* The smallest magnitudes: 10^-6 (0.1 + 0.45) and 10^-6 (0.1 + 0.225). */
    assert_true(s.level[128] == (float)5.5e-7 && s.level[126] == (float)-5.5e-7);
    assert_true(u.level[1] == (float)3.25e-7);
    /* Signed is symmetric apart from the extra level 1. */
    for (int k = 0; k < 127; k++)
        assert_true(s.level[k] == -s.level[254 - k]);
    check_decades(&s, 6);
    check_decades(&u, 7);
}

/* qdyn_nearest against a linear scan over all levels, on values near every level and midpoint
 * and on random ones. */
static int nearest_by_scan(const QdynCode *c, float v)
{
    int best = 0;
    for (int k = 1; k < QDYN_LEVELS; k++)
        if (fabsf(c->level[k] - v) < fabsf(c->level[best] - v))
            best = k;
    return best;
}

static void test_nearest(void **state)
{
    (void)state;
    for (int sign = 0; sign < 2; sign++) {
        QdynCode c;
        qdyn_code_init(&c, sign);
        for (int k = 0; k < QDYN_LEVELS; k++)
            assert_int_equal(qdyn_nearest(&c, c.level[k]), k);
        for (int k = 0; k + 1 < QDYN_LEVELS; k++) {
            assert_int_equal(qdyn_nearest(&c, c.mid[k]), k);   /* a tie goes down */
            assert_int_equal(qdyn_nearest(&c, nextafterf(c.mid[k], 2.0f)), k + 1);
        }
        Rng rng = rng_new(5, 0);
        for (int i = 0; i < 100000; i++) {
            float v = (sign ? 2.0f * rng_uniform(&rng) - 1.0f : rng_uniform(&rng)) *
                      powf(10.0f, -7.0f * rng_uniform(&rng));
            int got = qdyn_nearest(&c, v), want = nearest_by_scan(&c, v);
            /* Equal, or a tie that the scan broke the other way. */
            assert_true(got == want || fabsf(c.level[got] - v) == fabsf(c.level[want] - v));
        }
        assert_int_equal(qdyn_nearest(&c, 5.0f), 255);
        assert_int_equal(qdyn_nearest(&c, -5.0f), 0);
    }
}

/* Every value comes back within half the gap to its level's farther neighbour, times the absmax,
 * plus float rounding; the absmax itself comes back exactly. */
static void test_block_error_bound(void **state)
{
    (void)state;
    enum { N = 5000, BLOCK = 2048 };
    static float x[N], y[N];
    static uint8_t codes[N];
    float absmax[3];
    Rng rng = rng_new(7, 0);
    for (int sign = 0; sign < 2; sign++) {
        QdynCode c;
        qdyn_code_init(&c, sign);
        for (int i = 0; i < N; i++) {
            float g = rng_normal(&rng) * (float)(1 + i / BLOCK);   /* blocks of other scales */
            x[i] = sign ? g : g * g;
        }
        qdyn_quantize(&c, x, N, BLOCK, codes, absmax);
        qdyn_dequantize(&c, codes, N, BLOCK, absmax, y);
        double worst = 0.0;
        for (int i = 0; i < N; i++) {
            int k = codes[i];
            float a = absmax[i / BLOCK];
            double below = k > 0 ? c.level[k] - c.level[k - 1] : 0.0;
            double above = k < 255 ? c.level[k + 1] - c.level[k] : 0.0;
            double bound = 0.5 * fmax(below, above) * a + 1e-6 * a;
            if (!sign && k == 1)   /* the floor: anything positive below it rounds up */
                bound = c.level[1] * a;
            double err = fabs((double)x[i] - y[i]);
            assert_true(err <= bound);
            worst = fmax(worst, err / a);
            if (fabsf(x[i]) == a)
                assert_true(fabsf(y[i]) == a || (sign && x[i] < 0 && y[i] == -0.99296875f * a));
        }
        printf("dynamic %s: max |x - y| / absmax = %.4f (bound: half the level gap)\n",
               sign ? "signed" : "unsigned", worst);
    }
}

/* A positive value far below the smallest unsigned level keeps that level (code 1), not 0; an
 * exact 0 stays 0; signed values round to 0 as nearest rounding says. */
static void test_unsigned_floor(void **state)
{
    (void)state;
    QdynCode s, u;
    qdyn_code_init(&s, true);
    qdyn_code_init(&u, false);
    const float x[4] = { 2.0f, 1e-12f, 0.0f, 1e-7f };
    uint8_t codes[4];
    float y[4];
    float a = qdyn_quantize_block(&u, x, 4, codes);
    assert_true(a == 2.0f);
    assert_true(codes[0] == 255 && codes[1] == 1 && codes[2] == 0 && codes[3] == 1);
    qdyn_dequantize_block(&u, codes, 4, a, y);
    assert_true(y[0] == 2.0f && y[1] == 2.0f * u.level[1] && y[2] == 0.0f);
    const float xs[3] = { -2.0f, 1e-12f, -1e-12f };
    qdyn_quantize_block(&s, xs, 3, codes);
    assert_true(codes[0] == 0 && codes[1] == 127 && codes[2] == 127);
}

/* On values spread over six decades (|x| = 10^-6u, u uniform), as a second moment is, the
 * dynamic code keeps every value within 50% and most within 5%: at least half, so the median
 * relative error is under 5%. Linear int8 (quant.h, the same single block) rounds everything
 * below absmax / 254 to 0: more than half of them. */
static void test_dynamic_beats_linear_on_decades(void **state)
{
    (void)state;
    enum { N = 2048 };
    static float x[N], y_dyn[N], y_lin[N];
    static uint8_t codes[N];
    float absmax;
    Rng rng = rng_new(11, 0);
    for (int i = 0; i < N; i++)
        x[i] = powf(10.0f, -6.0f * rng_uniform(&rng));
    x[0] = 1.0f;
    QdynCode c;
    qdyn_code_init(&c, false);
    qdyn_quantize(&c, x, N, N, codes, &absmax);
    qdyn_dequantize(&c, codes, N, N, &absmax, y_dyn);
    QuantTensor *q = quant_new((QuantConfig){ .kind = QUANT_INT8, .block = N }, N);
    quant_quantize(q, x);
    quant_dequantize(q, y_lin);
    quant_free(q);
    int within = 0, lin_zero = 0;
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double rel = fabs(y_dyn[i] - x[i]) / x[i];
        worst = fmax(worst, rel);
        within += rel <= 0.05;
        lin_zero += y_lin[i] == 0.0f;
    }
    printf("values over 6 decades: dynamic code within 5%% for %d of %d (worst %.3f); linear "
           "int8 gives 0 for %d\n", within, N, worst, lin_zero);
    assert_true(worst <= 0.5);
    assert_true(within >= N / 2);
    assert_true(lin_zero > N / 2);
}

/* ---- the optimizer -------------------------------------------------------------------------- */

enum { ROWS = 64, COLS = 128, NB = 100, STEPS = 100 };

/* A quadratic 0.5 sum a_i (w_i - c_i)^2 over a [64, 128] matrix (8-bit state) and a bias of 100
 * (fp32 state), c_i ~ N(0, 1), curvatures a_i log-uniform over `decades` decades up to 1. */
typedef struct {
    Tensor *w, *b;
    Tensor *list[2];
    float   a[ROWS * COLS + NB], c[ROWS * COLS + NB];
} Quadratic;

static float *elem(Quadratic *q, int i)
{
    return i < ROWS * COLS ? &q->w->data[i] : &q->b->data[i - ROWS * COLS];
}

static void quadratic_init(Quadratic *q, float decades)
{
    q->w = tensor_param("w", 2, (int[]){ ROWS, COLS });
    q->b = tensor_param("b", 1, (int[]){ NB });
    q->list[0] = q->w;
    q->list[1] = q->b;
    Rng rng = rng_new(3, 0);
    for (int i = 0; i < ROWS * COLS + NB; i++) {
        q->a[i] = powf(10.0f, -decades * rng_uniform(&rng));
        q->c[i] = rng_normal(&rng);
        *elem(q, i) = 0.0f;
    }
}

static double quadratic_grad(Quadratic *q)
{
    double loss = 0.0;
    float *gw = tensor_grad(q->w), *gb = tensor_grad(q->b);
    for (int i = 0; i < ROWS * COLS + NB; i++) {
        double d = *elem(q, i) - q->c[i];
        loss += 0.5 * q->a[i] * d * d;
        float g = (float)(q->a[i] * d);
        if (i < ROWS * COLS)
            gw[i] = g;
        else
            gb[i - ROWS * COLS] = g;
    }
    return loss;
}

static void quadratic_free(Quadratic *q)
{
    tensor_free(q->w);
    tensor_free(q->b);
}

static double run_quadratic(Optim *o, Quadratic *q, double lr)
{
    for (int k = 0; k < STEPS; k++) {
        quadratic_grad(q);
        optim_step(o, lr);
    }
    return quadratic_grad(q);
}

typedef struct {
    double start, loss8, loss32;
    double rms_diff;        /* RMS over the matrix of w8 - w32 */
    double max_abs_w8;      /* largest |w| of the 8-bit run */
    double bias_diff;       /* max |b8 - b32| (fp32 state in both) */
} Comparison;

/* Same start, same problem, 100 steps at lr 0.02 of 8-bit Adam and of fp32 AdamW. */
static Comparison compare_on_quadratic(float decades, Adam8bitRounding rounding)
{
    static Quadratic q8, q32;
    quadratic_init(&q8, decades);
    quadratic_init(&q32, decades);
    Comparison r = { .start = quadratic_grad(&q32) };
    Adam8bitConfig c8 = adam8bit_defaults();
    c8.adam.weight_decay = 0.0;
    c8.rounding = rounding;
    Adam8bit *a8 = adam8bit_new(q8.list, 2, c8);
    AdamW *a32 = adamw_new(q32.list, 2, c8.adam);
    assert_true(adam8bit_is_quantized(a8, 0) && !adam8bit_is_quantized(a8, 1));
    r.loss8 = run_quadratic(&a8->base, &q8, 0.02);
    r.loss32 = run_quadratic(&a32->base, &q32, 0.02);
    double sum2 = 0.0;
    for (int i = 0; i < ROWS * COLS + NB; i++) {
        double d = fabs(*elem(&q8, i) - *elem(&q32, i));
        if (i < ROWS * COLS) {
            sum2 += d * d;
            r.max_abs_w8 = fmax(r.max_abs_w8, fabs(*elem(&q8, i)));
        } else {
            r.bias_diff = fmax(r.bias_diff, d);
        }
    }
    r.rms_diff = sqrt(sum2 / (ROWS * COLS));
    printf("quadratic, curvatures over %g decades, %d steps: loss %.3f -> AdamW %.4f, 8-bit "
           "(%s) %.4f (ratio %.4f); RMS |w8 - w32| %.4f; max |w8| %.3f\n", decades, STEPS,
           r.start, r.loss32, adam8bit_rounding_name(rounding), r.loss8, r.loss8 / r.loss32,
           r.rms_diff, r.max_abs_w8);
    optim_free(&a8->base);
    optim_free(&a32->base);
    quadratic_free(&q8);
    quadratic_free(&q32);
    return r;
}

/* Curvatures over one decade: 8-bit Adam ends within 3% of AdamW's loss, its weights within an
 * RMS of 0.04 of AdamW's (they moved about 1), and the fp32-state bias exactly as AdamW's up
 * to float reordering; with either rounding. */
static void test_tracks_adamw_on_a_quadratic(void **state)
{
    (void)state;
    for (int rounding = 0; rounding < ADAM8BIT_ROUND_COUNT; rounding++) {
        Comparison r = compare_on_quadratic(1.0f, (Adam8bitRounding)rounding);
        assert_true(r.loss32 < 0.1 * r.start);
        assert_true(fabs(r.loss8 / r.loss32 - 1.0) <= 0.03);
        assert_true(r.rms_diff <= 0.04);
        assert_true(r.bias_diff <= 1e-6);
    }
}

/* Curvatures over three decades: gradients in one block span more than the 3.5 decades that v's
 * seven decades can hold, so without the floor in qdyn_quantize_block small v's round to 0 and
 * m / (0 + eps) throws weights thousands of units away. With it the run stays bounded (|w| no
 * more than |c| allows, under 5 here). Rounding to the nearest level it ends within 10% of
 * AdamW's loss: the price of 8 bits is momentum that sticks to coarse levels for the smallest
 * gradients of a block. Rounding stochastically nothing sticks: within 2% (measured 0.7%,
 * against 4.5%), and closer to AdamW's weights. */
static void test_wide_gradient_range_stays_bounded(void **state)
{
    (void)state;
    Comparison near = compare_on_quadratic(3.0f, ADAM8BIT_ROUND_NEAREST);
    Comparison stoch = compare_on_quadratic(3.0f, ADAM8BIT_ROUND_STOCHASTIC);
    assert_true(near.max_abs_w8 < 5.0 && stoch.max_abs_w8 < 5.0);
    assert_true(fabs(near.loss8 / near.loss32 - 1.0) <= 0.10);
    assert_true(fabs(stoch.loss8 / stoch.loss32 - 1.0) <= 0.02);
    assert_true(stoch.rms_diff < near.rms_diff);
}

/* After one step from zero state, m = (1 - b1) g and v = (1 - b2) g^2 decode to within the
 * code's resolution: half the widest gap (0.9 / 64 of the block's absmax, for m) rounding to the
 * nearest level, the whole gap rounding stochastically (either neighbour). */
static void check_first_step_state(Adam8bitRounding rounding)
{
    enum { N = 6000 };
    Tensor *w = tensor_param("w", 1, (int[]){ N });
    tensor_fill(w, 0.0f);
    float *g = tensor_grad(w);
    Rng rng = rng_new(9, 0);
    for (int i = 0; i < N; i++)
        g[i] = rng_normal(&rng);
    g[10] = 0.0f;
    Adam8bitConfig c = adam8bit_defaults();
    c.rounding = rounding;
    Adam8bit *a = adam8bit_new(&w, 1, c);
    optim_step(&a->base, 1e-3);
    static float m[N], v[N];
    adam8bit_moments(a, 0, m, v);
    double gmax[3] = { 0 }, gaps = rounding == ADAM8BIT_ROUND_NEAREST ? 0.5 : 1.0;
    for (int i = 0; i < N; i++)
        gmax[i / 2048] = fmax(gmax[i / 2048], fabs(g[i]));
    for (int i = 0; i < N; i++) {
        double want_m = 0.1 * g[i], want_v = 0.001 * (double)g[i] * g[i];
        double am = 0.1 * gmax[i / 2048], av = 0.001 * gmax[i / 2048] * gmax[i / 2048];
        assert_true(fabs(m[i] - want_m) <= (gaps * 0.9 / 64 + 1e-6) * am);
        assert_true(fabs(v[i] - want_v) <= (gaps * 0.9 / 128 + 1e-6) * av);
    }
    assert_true(m[10] == 0.0f && v[10] == 0.0f);
    optim_free(&a->base);
    tensor_free(w);
}

static void test_first_step_state(void **state)
{
    (void)state;
    check_first_step_state(ADAM8BIT_ROUND_NEAREST);
    check_first_step_state(ADAM8BIT_ROUND_STOCHASTIC);
}

/* The sticking that stochastic rounding removes, on the first moment: one element per block has
 * gradient 1 throughout and holds the absmax (m -> 1); the others have gradient 0 for 100 steps,
 * then a constant g in [0.01, 0.02) for 200, so their m climbs from 0 towards g under a fixed
 * absmax, as a weight whose gradient changes does late in training. Exactly, m = g (1 - 0.9^200).
 * Rounding to the nearest level, m stops once 0.1 (g - m) is under half a gap: at the top of
 * decade 2 (0.0097; the next level up, 0.0114, is 0.0017 away) for g under 0.018, a third short.
 * (If the whole block's gradients moved together there would be nothing to see: m / absmax
 * would stay put.) Rounding stochastically, E[m_t] = 0.9 E[m_(t-1)] + 0.1 g is exact, and each
 * m_t is off by rounding noise of variance at most gap^2 / 4 per step, damped by 0.9^2 a step:
 * at most gap^2 / (4 (1 - 0.81)) in all, with gap <= 0.0028. Averaged over the 4094 small
 * elements, the mean is within 5 standard errors of the exact one. */
static double mean_m_error(Adam8bitRounding rounding, double *bound)
{
    enum { N = 4096, QUIET = 100, STEPS = 200 };
    Tensor *w = tensor_param("w", 1, (int[]){ N });
    tensor_fill(w, 0.0f);
    float *g = tensor_grad(w);
    Adam8bitConfig c = adam8bit_defaults();
    c.adam.beta2 = 0.99;
    c.rounding = rounding;
    c.seed = 17;
    Adam8bit *a = adam8bit_new(&w, 1, c);
    for (int t = 0; t < QUIET + STEPS; t++) {
        for (int i = 0; i < N; i++)
            g[i] = i % 2048 == 0 ? 1.0f
                 : t < QUIET  ? 0.0f : 0.01f + 0.01f * (float)(i % 16) / 16.0f;
        optim_step(&a->base, 1e-6);   /* the gradients are set by hand: w does not matter */
    }
    static float m[N], v[N];
    adam8bit_moments(a, 0, m, v);
    double sum8 = 0.0, sum = 0.0, done = 1.0 - pow(0.9, STEPS);
    int small = 0;
    for (int i = 0; i < N; i++) {
        if (i % 2048 == 0)
            continue;
        sum8 += m[i];
        sum += g[i] * done;
        small++;
    }
    double gap = 0.1 * 0.9 / 32;   /* the absmax is 1 - 0.9^300 = 1 in float */
    *bound = 5.0 * gap * sqrt(1.0 / (4.0 * (1.0 - 0.81)) / small);
    printf("gradient 0 then [0.01, 0.02), %d + %d steps, %s rounding: mean m %.6f, exact "
           "%.6f\n", QUIET, STEPS, adam8bit_rounding_name(rounding), sum8 / small, sum / small);
    optim_free(&a->base);
    tensor_free(w);
    return (sum8 - sum) / small;
}

static void test_stochastic_rounding_unsticks_momentum(void **state)
{
    (void)state;
    double bound, err_nearest = mean_m_error(ADAM8BIT_ROUND_NEAREST, &bound);
    double err_stochastic = mean_m_error(ADAM8BIT_ROUND_STOCHASTIC, &bound);
    printf("mean m - exact: nearest %+.2e, stochastic %+.2e (bound %.2e)\n", err_nearest,
           err_stochastic, bound);
    assert_true(fabs(err_stochastic) <= bound);
    assert_true(err_nearest < -0.002);   /* stuck well below: at least 10 bounds off */
}

/* The names, in the order of the enum, end with NULL; out of range is "?". */
static void test_rounding_names(void **state)
{
    (void)state;
    assert_string_equal(ADAM8BIT_ROUNDING_NAMES[ADAM8BIT_ROUND_NEAREST], "nearest");
    assert_string_equal(ADAM8BIT_ROUNDING_NAMES[ADAM8BIT_ROUND_STOCHASTIC], "stochastic");
    assert_null(ADAM8BIT_ROUNDING_NAMES[ADAM8BIT_ROUND_COUNT]);
    assert_string_equal(adam8bit_rounding_name(ADAM8BIT_ROUND_STOCHASTIC), "stochastic");
    assert_string_equal(adam8bit_rounding_name(ADAM8BIT_ROUND_COUNT), "?");
    assert_int_equal(adam8bit_defaults().rounding, ADAM8BIT_ROUND_NEAREST);
}

/* ---- state ---------------------------------------------------------------------------------- */

/* A [1024, 1024] matrix: 2 bytes per element plus 2 absmax floats per 2048, against AdamW's 8:
 * 0.2505 x. A small bias keeps 8 bytes per element. Measured in MEM_OPTIM. */
static void test_state_bytes(void **state)
{
    (void)state;
    enum { R = 1024, C = 1024, SMALL = 1000 };
    Tensor *w = tensor_param("w", 2, (int[]){ R, C });
    Tensor *b = tensor_param("b", 1, (int[]){ SMALL });
    size_t base = mem_current(MEM_OPTIM);
    Adam8bit *a8 = adam8bit_new(&w, 1, adam8bit_defaults());
    size_t bytes8 = mem_current(MEM_OPTIM) - base;
    AdamW *a32 = adamw_new(&w, 1, adamw_defaults());
    size_t bytes32 = mem_current(MEM_OPTIM) - base - bytes8;
    size_t n = (size_t)R * C;
    assert_int_equal(bytes8, 2 * n + 2 * 4 * (n / 2048));
    assert_int_equal(optim_state_bytes(&a8->base), bytes8);
    assert_int_equal(bytes32, 8 * n);
    double ratio = (double)bytes8 / (double)bytes32;
    printf("state of a %dx%d matrix: 8-bit Adam %zu bytes, AdamW %zu bytes: %.4f x\n", R, C,
           bytes8, bytes32, ratio);
    assert_true(ratio <= 0.26);
    Adam8bit *small = adam8bit_new(&b, 1, adam8bit_defaults());
    assert_int_equal(optim_state_bytes(&small->base), 8 * SMALL);
    optim_free(&a8->base);
    optim_free(&a32->base);
    optim_free(&small->base);
    assert_int_equal(mem_current(MEM_OPTIM), base);
    tensor_free(w);
    tensor_free(b);
}

static void test_state_names(void **state)
{
    (void)state;
    Tensor *w = tensor_param("w", 2, (int[]){ 100, 50 });
    Tensor *b = tensor_param("b", 1, (int[]){ 50 });
    Adam8bit *a = adam8bit_new((Tensor *[]){ w, b }, 2, adam8bit_defaults());
    const char *names[] = { "adam8bit.m.w", "adam8bit.v.w", "adam8bit.m_absmax.w",
                            "adam8bit.v_absmax.w", "adam8bit.m.b", "adam8bit.v.b" };
    const OptimBufType types[] = { OPTIM_BUF_U8, OPTIM_BUF_U8, OPTIM_BUF_F32, OPTIM_BUF_F32,
                                   OPTIM_BUF_F32, OPTIM_BUF_F32 };
    const size_t counts[] = { 5000, 5000, 3, 3, 50, 50 };
    assert_int_equal(optim_buffer_count(&a->base), 6);
    assert_int_equal(optim_state_count(&a->base), 0);
    for (int i = 0; i < 6; i++) {
        OptimBuffer *buf = optim_buffer(&a->base, i);
        assert_string_equal(buf->name, names[i]);
        assert_int_equal(buf->type, types[i]);
        assert_int_equal(buf->count, counts[i]);
        assert_ptr_equal(optim_find_buffer(&a->base, names[i]), buf);
    }
    assert_null(optim_find_buffer(&a->base, "adam8bit.m.nothing"));
    optim_free(&a->base);
    tensor_free(w);
    tensor_free(b);
}

/* Copying every buffer and the step counter into a fresh optimizer continues the run exactly;
 * and the result does not depend on the number of threads. */
static void run_steps(Optim *o, Quadratic *q, int steps)
{
    for (int k = 0; k < steps; k++) {
        quadratic_grad(q);
        optim_step(o, 0.01);
    }
}

static void check_restore_and_threads(Adam8bitRounding rounding)
{
    static Quadratic p, q, r;
    quadratic_init(&p, 2.0f);
    quadratic_init(&q, 2.0f);
    quadratic_init(&r, 2.0f);
    Adam8bitConfig cfg = adam8bit_defaults();
    cfg.rounding = rounding;
    Adam8bit *a = adam8bit_new(p.list, 2, cfg);
    Adam8bit *b = adam8bit_new(q.list, 2, cfg);
    Adam8bit *c = adam8bit_new(r.list, 2, cfg);
    int threads = par_threads();
    run_steps(&a->base, &p, 5);
    par_set_threads(1);
    run_steps(&c->base, &r, 10);
    par_set_threads(threads);
    tensor_copy_data(q.w, p.w);
    tensor_copy_data(q.b, p.b);
    for (int i = 0; i < optim_buffer_count(&a->base); i++) {
        OptimBuffer *from = optim_buffer(&a->base, i);
        OptimBuffer *to = optim_find_buffer(&b->base, from->name);
        memcpy(to->data, from->data, optim_buffer_bytes(from));
    }
    b->base.step = a->base.step;
    run_steps(&a->base, &p, 5);
    run_steps(&b->base, &q, 5);
    assert_memory_equal(p.w->data, q.w->data, ROWS * COLS * sizeof(float));
    assert_memory_equal(p.b->data, q.b->data, NB * sizeof(float));
    assert_memory_equal(p.w->data, r.w->data, ROWS * COLS * sizeof(float));
    optim_free(&a->base);
    optim_free(&b->base);
    optim_free(&c->base);
    quadratic_free(&p);
    quadratic_free(&q);
    quadratic_free(&r);
}

/* Stochastic rounding too: its random bits depend on the step, the parameter and the element,
 * never on a generator's state or on which thread encodes a block. */
static void test_restore_and_threads(void **state)
{
    (void)state;
    check_restore_and_threads(ADAM8BIT_ROUND_NEAREST);
    check_restore_and_threads(ADAM8BIT_ROUND_STOCHASTIC);
}

/* A trainer's snapshot keeps the rounding ("optim.rounding"), and reading it back gives the
 * rounding saved. A snapshot without the key (saved before it existed; made here by renaming the
 * key in the file's header to one of the same length) reads as nearest, the only rounding there
 * was then. */
static Adam8bitRounding rounding_after_save(Adam8bitRounding rounding, bool drop_key)
{
    char dir[] = "/tmp/test_adam8bit_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = 11, .max_seq = 8, .n_layer = 1, .n_head = 2,
                           .n_embd = 32, .tied = true, .fused_qkv = true };
    c.optimizer = TRAIN_ADAM8BIT;
    c.adam8bit_rounding = rounding;
    Trainer *t = trainer_new(&c);
    SnapshotError err;
    assert_true(train_snapshot_save(t, path, NULL, NULL, 0, &err));
    trainer_free(t);
    if (drop_key) {
        FILE *f = fopen(path, "r+b");
        static char head[1 << 16];
        size_t n = fread(head, 1, sizeof head - 1, f);
        head[n] = 0;
        char *key = strstr(head + 8, "\"optim.rounding\"");
        assert_non_null(key);
        fseek(f, key - head + 1, SEEK_SET);
        fputs("optim.xounding", f);
        fclose(f);
    }
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    const char *saved = snapshot_meta(r, "optim.rounding");
    if (!drop_key)
        assert_string_equal(saved, adam8bit_rounding_name(rounding));
    TrainerConfig back;
    assert_true(train_snapshot_config(r, path, &back, &err));
    snapshot_close(r);
    remove(path);
    rmdir(dir);
    return back.adam8bit_rounding;
}

static void test_snapshot_keeps_the_rounding(void **state)
{
    (void)state;
    assert_int_equal(trainer_config_default().adam8bit_rounding, ADAM8BIT_ROUND_NEAREST);
    assert_int_equal(rounding_after_save(ADAM8BIT_ROUND_NEAREST, false), ADAM8BIT_ROUND_NEAREST);
    assert_int_equal(rounding_after_save(ADAM8BIT_ROUND_STOCHASTIC, false),
                     ADAM8BIT_ROUND_STOCHASTIC);
    assert_int_equal(rounding_after_save(ADAM8BIT_ROUND_STOCHASTIC, true),
                     ADAM8BIT_ROUND_NEAREST);
}

/* The trainer's seed reaches the rounding (it did not: every run drew seed 0's bits). Trainers
 * of seeds 1, 1 and 2 start from the same weights (copied) and take the same step; the codes of
 * the moments are the same bits for the two of seed 1 and differ for seed 2. A snapshot of
 * seed 2 resumes with its bits: one more step after a save and a load equals one more step
 * straight. */
static Trainer *seeded_trainer(uint64_t seed)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = 11, .max_seq = 8, .n_layer = 1, .n_head = 2,
                           .n_embd = 64, .tied = true, .fused_qkv = true };
    c.optimizer = TRAIN_ADAM8BIT;
    c.adam8bit_rounding = ADAM8BIT_ROUND_STOCHASTIC;
    c.seed = seed;
    return trainer_new(&c);
}

static void copy_weights(Trainer *to, const Trainer *from)
{
    int n;
    Tensor *const *src = gpt_params(from->model, &n), *const *dst = gpt_params(to->model, &n);
    for (int i = 0; i < n; i++)
        tensor_copy_data(dst[i], src[i]);
}

/* Whether every buffer of a and b holds the same bytes. */
static bool same_codes(const Trainer *a, const Trainer *b)
{
    assert_int_equal(optim_buffer_count(a->optim), optim_buffer_count(b->optim));
    for (int i = 0; i < optim_buffer_count(a->optim); i++) {
        const OptimBuffer *x = optim_buffer(a->optim, i), *y = optim_buffer(b->optim, i);
        if (memcmp(x->data, y->data, optim_buffer_bytes(x)) != 0)
            return false;
    }
    return true;
}

static void test_trainer_seed_reaches_rounding(void **state)
{
    (void)state;
    enum { B = 4, T = 8 };
    int tokens[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (i * 7 + 3) % 11;
        targets[i] = (i * 5 + 1) % 11;
    }
    Trainer *a = seeded_trainer(1), *b = seeded_trainer(1), *c = seeded_trainer(2);
    copy_weights(c, a);
    Trainer *all[] = { a, b, c };
    for (int k = 0; k < 3; k++)
        for (int s = 0; s < 2; s++)
            trainer_step(all[k], tokens, targets, B, T, 1e-2);
    assert_true(same_codes(a, b));
    assert_false(same_codes(a, c));

    char dir[] = "/tmp/test_adam8bit_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/seed2.safetensors", dir);
    SnapshotError err;
    assert_true(train_snapshot_save(c, path, NULL, NULL, 0, &err));
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    Trainer *d = train_snapshot_load(r, path, &err);
    assert_non_null(d);
    snapshot_close(r);
    trainer_step(c, tokens, targets, B, T, 1e-2);
    trainer_step(d, tokens, targets, B, T, 1e-2);
    assert_true(same_codes(c, d));
    int n;
    Tensor *const *pc = gpt_params(c->model, &n), *const *pd = gpt_params(d->model, &n);
    for (int i = 0; i < n; i++)
        assert_memory_equal(pc[i]->data, pd[i]->data, pc[i]->size * sizeof(float));
    remove(path);
    rmdir(dir);
    for (int k = 0; k < 3; k++)
        trainer_free(all[k]);
    trainer_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_code_tables),
        cmocka_unit_test(test_trainer_seed_reaches_rounding),
        cmocka_unit_test(test_nearest),
        cmocka_unit_test(test_block_error_bound),
        cmocka_unit_test(test_unsigned_floor),
        cmocka_unit_test(test_dynamic_beats_linear_on_decades),
        cmocka_unit_test(test_tracks_adamw_on_a_quadratic),
        cmocka_unit_test(test_wide_gradient_range_stays_bounded),
        cmocka_unit_test(test_first_step_state),
        cmocka_unit_test(test_stochastic_rounding_unsticks_momentum),
        cmocka_unit_test(test_rounding_names),
        cmocka_unit_test(test_state_bytes),
        cmocka_unit_test(test_state_names),
        cmocka_unit_test(test_restore_and_threads),
        cmocka_unit_test(test_snapshot_keeps_the_rounding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
