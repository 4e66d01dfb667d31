/* The wire formats of the gradient collectives (dist/wire.h). */
#include "dist/wire.h"

#include <math.h>
#include <string.h>

#include "autograd/mem.h"
#include "precision/format.h"

const char *const DIST_WIRE_NAMES[] = { "fp32", "bf16", "e5m2", NULL };

int dist_wire_parse(const char *name)
{
    for (int w = 0; w < DIST_WIRE_COUNT; w++)
        if (strcmp(name, DIST_WIRE_NAMES[w]) == 0)
            return w;
    return -1;
}

size_t dist_wire_bytes(DistWire w, size_t n)
{
    switch (w) {
    case DIST_WIRE_BF16: return fmt_packed_bytes(FMT_BF16, n);
    case DIST_WIRE_E5M2: return sizeof(float) + fmt_packed_bytes(FMT_E5M2, n);
    default:             return n * sizeof(float);
    }
}

/* The largest power of two s with amax s <= e5m2's largest finite; 1 for an all-zero message
 * or one with an inf or a NaN (which must arrive as they are). */
static float e5m2_scale(const float *x, size_t n)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return 1.0f;
        amax = fmaxf(amax, fabsf(x[i]));
    }
    if (amax == 0.0f)
        return 1.0f;
    int e;
    frexpf(fmt_info(FMT_E5M2)->max_finite / amax, &e);     /* ratio in [2^(e-1), 2^e) */
    return ldexpf(1.0f, e - 1);
}

void dist_wire_encode(DistWire w, const float *x, size_t n, void *msg)
{
    Rounding nearest = { 0 };
    if (w == DIST_WIRE_BF16) {
        fmt_encode_array(FMT_BF16, x, msg, n, nearest, 0);
    } else if (w == DIST_WIRE_E5M2) {
        float s = e5m2_scale(x, n);
        memcpy(msg, &s, sizeof s);
        float *scaled = mem_alloc(MEM_TEMP, (n ? n : 1) * sizeof *scaled);
        for (size_t i = 0; i < n; i++)
            scaled[i] = x[i] * s;       /* exact: s is a power of two, amax s in range */
        fmt_encode_array(FMT_E5M2, scaled, (char *)msg + sizeof s, n, nearest, 0);
        mem_free(scaled);
    } else {
        memcpy(msg, x, n * sizeof *x);
    }
}

void dist_wire_decode(DistWire w, const void *msg, size_t n, float *y)
{
    if (w == DIST_WIRE_BF16) {
        fmt_decode_array(FMT_BF16, msg, y, n);
    } else if (w == DIST_WIRE_E5M2) {
        float s;
        memcpy(&s, msg, sizeof s);
        fmt_decode_array(FMT_E5M2, (const char *)msg + sizeof s, y, n);
        for (size_t i = 0; i < n; i++)
            y[i] /= s;
    } else {
        memmove(y, msg, n * sizeof *y);
    }
}

void dist_wire_round(DistWire w, const float *x, float *y, size_t n)
{
    if (w == DIST_WIRE_FP32) {
        memmove(y, x, n * sizeof *y);
        return;
    }
    void *msg = mem_alloc(MEM_TEMP, dist_wire_bytes(w, n ? n : 1));
    dist_wire_encode(w, x, n, msg);
    dist_wire_decode(w, msg, n, y);
    mem_free(msg);
}
