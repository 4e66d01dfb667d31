/* Every format against a brute-force reference that shares no code with the library: the
 * format's values are built from the definition (sign, exponent, mantissa -> a double with
 * ldexp), and rounding is a search for the two neighbours of the input in that sorted table,
 * followed by the textbook choice for each mode and the overflow rules of format.h.
 *
 * Inputs, for fp8, fp4 and also fp16, bf16 and tf32: every table value, every midpoint between
 * neighbours and the fp32 values just below and above it (the overflow threshold is the
 * midpoint between max and the next value the format would have with a wider exponent), a
 * large random sample of fp32 bit patterns, of values in the format's range, and of fp32
 * subnormals; both signs, five deterministic modes, with and without saturation. */
#include "precision/format.h"

#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

enum { RANDOM_PATTERNS = 200000, RANDOM_IN_RANGE = 200000, RANDOM_SUBNORMALS = 20000 };

/* The non-negative finite values of a format, ascending, and one more: the value the format
 * would have next if its exponent were wider (max + one ulp), where overflow begins. */
typedef struct {
    double *val;
    size_t  count;      /* finite values; val[count] is the virtual next value */
} Table;

static double value_from_fields(const FormatInfo *fi, uint32_t e, uint32_t m)
{
    int mb = fi->mantissa_bits;
    if (e == 0)
        return ldexp((double)m, 1 - fi->bias - mb);
    return ldexp((double)((1u << mb) + m), (int)e - fi->bias - mb);
}

static Table build_table(Format f)
{
    const FormatInfo *fi = fmt_info(f);
    uint32_t mcount = 1u << fi->mantissa_bits;
    size_t cap = ((size_t)1 << fi->exponent_bits) * mcount + 1;
    Table t = {malloc(cap * sizeof(double)), 0};
    for (uint32_t e = 0; e < (1u << fi->exponent_bits); e++) {
        for (uint32_t m = 0; m < mcount; m++) {
            double v = value_from_fields(fi, e, m);
            if (v > fi->max_finite)
                goto done;
            t.val[t.count++] = v;
        }
    }
done:
    t.val[t.count] = t.val[t.count - 1] + (t.val[t.count - 1] - t.val[t.count - 2]);
    return t;
}

/* The library's promised result for x, from the table. NaN results are returned as NaN with
 * the expected sign. */
static double reference_round(const Table *t, const FormatInfo *fi, float xf, RoundMode mode,
                              bool saturate)
{
    double x = xf, ax = fabs(x), max = fi->max_finite;
    int neg = signbit(xf) != 0;
    double infinity = saturate ? max : fi->has_inf ? INFINITY : fi->has_nan ? NAN : max;
    if (isnan(x))
        return copysign(fi->has_nan ? NAN : max, x);
    if (isinf(x))
        return copysign(infinity, x);
    int away = mode == FMT_ROUND_NEAREST_EVEN || mode == FMT_ROUND_NEAREST_AWAY ||
               (mode == FMT_ROUND_UP && !neg) || (mode == FMT_ROUND_DOWN && neg);
    if (ax >= t->val[t->count])
        return copysign(away ? infinity : max, x);
    size_t lo = 0, hi = t->count;       /* largest i with val[i] <= ax, by bisection */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (t->val[mid] <= ax)
            lo = mid;
        else
            hi = mid;
    }
    double below = t->val[lo], above = t->val[lo + 1], r = below;
    if (below != ax) {
        double d_below = ax - below, d_above = above - ax;
        int up;
        switch (mode) {
        case FMT_ROUND_NEAREST_EVEN:
            up = d_above < d_below || (d_above == d_below && (lo + 1) % 2 == 0);
            break;
        case FMT_ROUND_NEAREST_AWAY: up = d_above <= d_below; break;
        case FMT_ROUND_UP: up = !neg; break;
        case FMT_ROUND_DOWN: up = neg; break;
        default: up = 0; break;
        }
        r = up ? above : below;
        if (up && lo + 1 == t->count)
            r = infinity;
    }
    return copysign(r, x);
}

static bool same_result(float got, double want)
{
    if (isnan(want))
        return isnan(got) && !signbit(got) == !signbit(want);
    return (double)got == want && !signbit(got) == !signbit(want);
}

/* ---- inputs ---------------------------------------------------------------------------- */

typedef struct {
    float *x;
    size_t n, cap;
} Inputs;

static void add(Inputs *in, float v)
{
    if (in->n + 2 > in->cap) {
        in->cap = in->cap ? 2 * in->cap : 4096;
        in->x = realloc(in->x, in->cap * sizeof *in->x);
    }
    in->x[in->n++] = v;
    in->x[in->n++] = -v;
}

static float random_float(uint64_t seed, uint64_t i)
{
    uint32_t u = fmt_random_bits(seed, i);
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* Values near and between every pair of neighbours, specials, and random samples. */
static Inputs make_inputs(const Table *t, const FormatInfo *fi)
{
    Inputs in = {0};
    for (size_t i = 0; i < t->count; i++) {
        float a = (float)t->val[i], b = (float)t->val[i + 1];
        float mid = (float)((t->val[i] + t->val[i + 1]) / 2);
        assert_true((double)mid == (t->val[i] + t->val[i + 1]) / 2);     /* exact in fp32 */
        add(&in, a);
        add(&in, nextafterf(a, INFINITY));
        add(&in, nextafterf(mid, 0));
        add(&in, mid);
        add(&in, nextafterf(mid, INFINITY));
        add(&in, nextafterf(b, 0));
    }
    add(&in, INFINITY);
    add(&in, NAN);
    add(&in, 3.0e38f);
    add(&in, 0x1p-149f);
    for (uint64_t i = 0; i < RANDOM_PATTERNS; i++)
        add(&in, random_float(1, i));
    int lo_exp = 1 - fi->bias - fi->mantissa_bits - 3, span = 2 * fi->bias + fi->mantissa_bits + 6;
    for (uint64_t i = 0; i < RANDOM_IN_RANGE; i++) {
        uint32_t u = fmt_random_bits(2, i);
        float m = 1.0f + (float)(u & 0xffffff) * 0x1p-24f;
        add(&in, ldexpf(m, lo_exp + (int)(fmt_random_bits(3, i) % (uint32_t)span)));
    }
    for (uint64_t i = 0; i < RANDOM_SUBNORMALS; i++) {
        uint32_t u = fmt_random_bits(4, i) & 0x007fffff;
        float v;
        memcpy(&v, &u, sizeof v);
        add(&in, v);
    }
    return in;
}

/* ---- the checks ------------------------------------------------------------------------ */

/* Scalar fmt_round against the reference; array functions against the scalar. */
static size_t check_mode(Format f, const Table *t, const Inputs *in, Rounding r)
{
    const FormatInfo *fi = fmt_info(f);
    float *arr = malloc(in->n * sizeof *arr);
    void *packed = malloc(fmt_packed_bytes(f, in->n));
    float *dec = malloc(in->n * sizeof *dec);
    fmt_round_array(f, in->x, arr, in->n, r, 0);
    fmt_encode_array(f, in->x, packed, in->n, r, 0);
    fmt_decode_array(f, packed, dec, in->n);
    size_t bad = 0;
    #pragma omp parallel for reduction(+ : bad) schedule(static)
    for (size_t i = 0; i < in->n; i++) {
        float got = fmt_round(f, in->x[i], r, 0);
        double want = reference_round(t, fi, in->x[i], r.mode, r.saturate);
        int ok = same_result(got, want) && memcmp(&got, &arr[i], sizeof got) == 0 &&
                 memcmp(&got, &dec[i], sizeof got) == 0;
        if (!ok && bad++ < 3) {
            #pragma omp critical
            print_message("%s %s%s: x=%a got %a array %a want %a\n", fi->name,
                          fmt_round_name(r.mode), r.saturate ? " saturate" : "", in->x[i],
                          got, arr[i], want);
        }
    }
    free(arr);
    free(packed);
    free(dec);
    return bad;
}

static void check_format(Format f)
{
    double t0 = omp_get_wtime();
    Table t = build_table(f);
    const FormatInfo *fi = fmt_info(f);
    assert_true(t.val[t.count - 1] == fi->max_finite);
    assert_true(t.val[1] == fi->min_subnormal);
    Inputs in = make_inputs(&t, fi);
    size_t bad = 0;
    for (int mode = 0; mode < FMT_ROUND_STOCHASTIC; mode++)
        for (int sat = 0; sat < 2; sat++)
            bad += check_mode(f, &t, &in, (Rounding){.mode = mode, .saturate = sat});
    print_message("%s: %zu table values, %zu inputs x 5 modes x 2 overflow rules, %zu "
                  "mismatches, %.1f s\n", fi->name, t.count, in.n, bad, omp_get_wtime() - t0);
    assert_int_equal(bad, 0);
    free(t.val);
    free(in.x);
}

static void test_e4m3(void **state) { (void)state; check_format(FMT_E4M3); }
static void test_e5m2(void **state) { (void)state; check_format(FMT_E5M2); }
static void test_e2m1(void **state) { (void)state; check_format(FMT_E2M1); }
static void test_fp16(void **state) { (void)state; check_format(FMT_FP16); }
static void test_bf16(void **state) { (void)state; check_format(FMT_BF16); }
static void test_tf32(void **state) { (void)state; check_format(FMT_TF32); }

/* Every code decodes to the value its fields define, and encodes back to itself. */
static void check_codes(Format f)
{
    const FormatInfo *fi = fmt_info(f);
    int mb = fi->mantissa_bits, eb = fi->exponent_bits, bits = fi->bits;
    uint32_t emax = (1u << eb) - 1, ncodes = 1u << bits, finite = 0;
    for (uint32_t c = 0; c < ncodes; c++) {
        uint32_t s = c >> (bits - 1), e = (c >> mb) & emax, m = c & ((1u << mb) - 1);
        uint32_t stored = f == FMT_TF32 ? c << 13 : c;
        float got = fmt_decode(f, stored);
        double want = value_from_fields(fi, e, m);
        bool is_nan = (fi->has_inf && e == emax && m != 0) ||
                      (f == FMT_E4M3 && e == emax && m == (1u << mb) - 1);
        bool is_inf = fi->has_inf && e == emax && m == 0;
        if (is_nan) {
            assert_true(isnan(got));
        } else if (is_inf) {
            assert_true(isinf(got));
        } else {
            assert_true((double)got == (s ? -want : want));
            finite++;
            assert_int_equal(fmt_encode(f, got, (Rounding){0}, 0), stored);
        }
        assert_int_equal(signbit(got) != 0, s);
    }
    print_message("%s: %u codes, %u finite, all decode to their fields' value\n", fi->name,
                  ncodes, finite);
}

static void test_codes(void **state)
{
    (void)state;
    for (int f = FMT_TF32; f < FMT_COUNT; f++)
        check_codes(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codes),
        cmocka_unit_test(test_e4m3),
        cmocka_unit_test(test_e5m2),
        cmocka_unit_test(test_e2m1),
        cmocka_unit_test(test_fp16),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_tf32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
