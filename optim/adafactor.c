#include "optim/adafactor.h"

#include <math.h>
#include <stdlib.h>

AdafactorConfig adafactor_defaults(void)
{
    return (AdafactorConfig){ .beta1 = 0.0, .decay_exponent = 0.8, .eps1 = 1e-30, .eps2 = 1e-3,
                              .clip_threshold = 1.0, .relative_step = true,
                              .scale_parameter = true, .factored = true, .weight_decay = 0.0,
                              .decay_rule = OPTIM_DECAY_MATRICES };
}

static bool factored_rule(const AdafactorConfig *c, const Tensor *p)
{
    return c->factored && p->ndim >= 2;
}

bool adafactor_is_factored(const Adafactor *a, int i)
{
    return factored_rule(&a->cfg, a->base.params[i]);
}

/* Parameter i as a matrix [rows, cols] (a vector is one row) and its buffers. */
typedef struct {
    long   rows, cols;
    float *row, *col;    /* factored */
    float *v;            /* not factored */
    float *m;            /* with a first moment */
} State;

/* Buffers are added parameter by parameter: row and col, or v; then m if b1 > 0. */
static int buffers_of(const Adafactor *a, int i)
{
    return (adafactor_is_factored(a, i) ? 2 : 1) + (a->cfg.beta1 > 0.0 ? 1 : 0);
}

static State param_state(const Adafactor *a, int i)
{
    int k = 0;
    for (int j = 0; j < i; j++)
        k += buffers_of(a, j);
    const Tensor *p = a->base.params[i];
    OptimBuffer *b = a->base.bufs + k;
    State s = { .cols = tensor_last_dim(p) };
    s.rows = (long)(p->size / (size_t)s.cols);
    if (adafactor_is_factored(a, i)) {
        s.row = b[0].data;
        s.col = b[1].data;
        b += 2;
    } else {
        s.v = (b++)->data;
    }
    if (a->cfg.beta1 > 0.0)
        s.m = b->data;
    return s;
}

/* Scratch for one tensor's step: per-row sums (double) and the factors of 1 / sqrt(V). */
typedef struct {
    double *row_g2, *row_x2, *row_u2;   /* [rows] */
    double *col_g2;                     /* [cols] */
    float  *rf, *cf;                    /* 1/sqrt(V_ij) = rf_i cf_j (factored) */
} Scratch;

static Scratch scratch_new(long rows, long cols, void **block)
{
    size_t d = (size_t)(3 * rows + cols), f = (size_t)(rows + cols);
    double *p = mem_alloc(MEM_TEMP, d * sizeof(double) + f * sizeof(float));
    *block = p;
    float *q = (float *)(p + d);
    return (Scratch){ .row_g2 = p, .row_x2 = p + rows, .row_u2 = p + 2 * rows,
                      .col_g2 = p + 3 * rows, .rf = q, .cf = q + rows };
}

/* Pass 1: sum of g^2 and of x^2 per row (rows in parallel), and of g^2 per column (row by row,
 * so the order of the additions is fixed). */
static void sum_squares(const State *s, const Tensor *p, const float *grad, bool columns,
                        Scratch *w)
{
    long rows = s->rows, cols = s->cols;
#pragma omp parallel for schedule(static) if ((long)p->size >= OPTIM_PARALLEL_MIN)
    for (long i = 0; i < rows; i++) {
        const float *g = grad + i * cols, *x = p->data + i * cols;
        double g2 = 0.0, x2 = 0.0;
        for (long j = 0; j < cols; j++) {
            g2 += (double)g[j] * g[j];
            x2 += (double)x[j] * x[j];
        }
        w->row_g2[i] = g2;
        w->row_x2[i] = x2;
    }
    if (!columns)
        return;
    for (long j = 0; j < cols; j++)
        w->col_g2[j] = 0.0;
    for (long i = 0; i < rows; i++)
        for (long j = 0; j < cols; j++)
            w->col_g2[j] += (double)grad[i * cols + j] * grad[i * cols + j];
}

/* Pass 2 (factored): R and C, then rf_i = 1 / sqrt(R_i / sum R) and cf_j = 1 / sqrt(C_j). */
static void update_factors(const State *s, float b2, double eps1, Scratch *w)
{
    double sum_r = 0.0;
    for (long i = 0; i < s->rows; i++) {
        s->row[i] = b2 * s->row[i] + (1.0f - b2) * (float)(w->row_g2[i] + s->cols * eps1);
        sum_r += s->row[i];
    }
    for (long j = 0; j < s->cols; j++) {
        s->col[j] = b2 * s->col[j] + (1.0f - b2) * (float)(w->col_g2[j] + s->rows * eps1);
        w->cf[j] = (float)(1.0 / sqrt((double)s->col[j]));
    }
    for (long i = 0; i < s->rows; i++)
        w->rf[i] = (float)(1.0 / sqrt(s->row[i] / sum_r));
}

/* U_ij = g_ij / sqrt(V_ij). */
static inline float unclipped(const State *s, const Scratch *w, const float *g, long i, long j)
{
    long k = i * s->cols + j;
    return s->v ? g[k] / sqrtf(s->v[k]) : g[k] * w->rf[i] * w->cf[j];
}

/* Pass 3: the full V updated (when not factored) and sum U^2 per row. */
static void sum_update_squares(const State *s, const Tensor *p, const float *grad, float b2,
                               float eps1, Scratch *w)
{
    long rows = s->rows, cols = s->cols;
#pragma omp parallel for schedule(static) if ((long)p->size >= OPTIM_PARALLEL_MIN)
    for (long i = 0; i < rows; i++) {
        double u2 = 0.0;
        for (long j = 0; j < cols; j++) {
            long k = i * cols + j;
            if (s->v)
                s->v[k] = b2 * s->v[k] + (1.0f - b2) * (grad[k] * grad[k] + eps1);
            float u = unclipped(s, w, grad, i, j);
            u2 += (double)u * u;
        }
        w->row_u2[i] = u2;
    }
}

static double total(const double *x, long n)
{
    double sum = 0.0;
    for (long i = 0; i < n; i++)
        sum += x[i];
    return sum;
}

/* The step size a of parameter p at step t and learning-rate argument lr. */
static double step_size(const AdafactorConfig *c, double t, double lr, double rms_x)
{
    double rho = c->relative_step ? fmin(1e-2, 1.0 / sqrt(t)) : lr;
    return c->scale_parameter ? rho * fmax(c->eps2, rms_x) : rho;
}

static void update_tensor(const Adafactor *a, int i, double t, double lr, float b2)
{
    const AdafactorConfig *c = &a->cfg;
    Tensor *p = a->base.params[i];
    State s = param_state(a, i);
    void *block;
    Scratch w = scratch_new(s.rows, s.cols, &block);
    double n = (double)p->size;
    float *scratch;     /* a packed gradient's fp32 values, for this tensor's update */
    const float *grad = tensor_grad_read(p, &scratch);

    sum_squares(&s, p, grad, s.row != NULL, &w);
    if (s.row)
        update_factors(&s, b2, c->eps1, &w);
    sum_update_squares(&s, p, grad, b2, (float)c->eps1, &w);
    double rms_u = sqrt(total(w.row_u2, s.rows) / n);
    double rms_x = sqrt(total(w.row_x2, s.rows) / n);
    double clip = c->clip_threshold > 0.0 ? fmax(1.0, rms_u / c->clip_threshold) : 1.0;
    double alpha = step_size(c, t, lr, rms_x);

    float scale = (float)(1.0 / clip), b1 = (float)c->beta1, one_minus_b1 = (float)(1.0 - c->beta1);
    float shrink = a->base.decay[i] ? (float)(1.0 - alpha * c->weight_decay) : 1.0f;
    float fa = (float)alpha;
    long rows = s.rows, cols = s.cols;
#pragma omp parallel for schedule(static) if ((long)p->size >= OPTIM_PARALLEL_MIN)
    for (long r = 0; r < rows; r++) {
        for (long j = 0; j < cols; j++) {
            long k = r * cols + j;
            float u = unclipped(&s, &w, grad, r, j) * scale;
            if (s.m) {
                s.m[k] = b1 * s.m[k] + one_minus_b1 * u;
                u = s.m[k];
            }
            p->data[k] = p->data[k] * shrink - fa * u;
        }
    }
    mem_free(block);
    mem_free(scratch);
}

static void adafactor_update(Optim *o, double lr)
{
    const Adafactor *a = (const Adafactor *)o;
    double t = (double)o->step;
    float b2 = (float)(1.0 - pow(t, -a->cfg.decay_exponent));
    for (int i = 0; i < o->n; i++)
        if (tensor_has_grad(o->params[i]))
            update_tensor(a, i, t, lr, b2);
}

Adafactor *adafactor_new(Tensor *const *params, int n, AdafactorConfig cfg)
{
    if (!(cfg.beta1 >= 0.0 && cfg.beta1 < 1.0))
        tensor_fatal("adafactor: beta1 %g must be in [0, 1)", cfg.beta1);
    if (!(cfg.decay_exponent > 0.0 && cfg.decay_exponent <= 1.0))
        tensor_fatal("adafactor: decay exponent %g must be in (0, 1]", cfg.decay_exponent);
    Adafactor *a = calloc(1, sizeof *a);
    if (!a)
        tensor_fatal("out of memory for an optimizer");
    a->cfg = cfg;
    optim_init(&a->base, "adafactor", params, n, cfg.decay_rule, 0, NULL, adafactor_update);
    for (int i = 0; i < n; i++) {
        size_t cols = (size_t)tensor_last_dim(params[i]), rows = params[i]->size / cols;
        if (adafactor_is_factored(a, i)) {
            optim_add_buffer(&a->base, i, "row", OPTIM_BUF_F32, rows);
            optim_add_buffer(&a->base, i, "col", OPTIM_BUF_F32, cols);
        } else {
            optim_add_buffer(&a->base, i, "v", OPTIM_BUF_F32, params[i]->size);
        }
        if (cfg.beta1 > 0.0)
            optim_add_buffer(&a->base, i, "m", OPTIM_BUF_F32, params[i]->size);
    }
    return a;
}

#define AF(f) offsetof(AdafactorConfig, f)
static const SchemaRow ADAFACTOR_ROWS[] = {
    { .key = "beta1", .type = SCHEMA_DOUBLE, .offset = AF(beta1), .lo = 0.0, .hi = 0.9999,
      .def = "0", .kept = true, .help = "adafactor's first moment decay, 0 = none" },
    { .key = "decay_exponent", .type = SCHEMA_DOUBLE, .offset = AF(decay_exponent), .lo = 1e-6,
      .hi = 1.0, .def = "0.8", .kept = true, .help = "adafactor's second moment decay 1 - t^-c" },
    { .key = "eps1", .type = SCHEMA_DOUBLE, .offset = AF(eps1), .lo = 1e-30, .hi = 1.0,
      .def = "1e-30", .kept = true, .help = "adafactor's floor of the squared gradient" },
    { .key = "eps2", .type = SCHEMA_DOUBLE, .offset = AF(eps2), .lo = 1e-30, .hi = 1.0,
      .def = "0.001", .kept = true, .help = "adafactor's floor of the parameter scale" },
    { .key = "clip_threshold", .type = SCHEMA_DOUBLE, .offset = AF(clip_threshold), .lo = 1e-6,
      .hi = 1e6, .def = "1", .kept = true, .help = "adafactor's update clipping" },
    { .key = "relative_step", .type = SCHEMA_BOOL, .offset = AF(relative_step), .def = "true",
      .kept = true, .help = "adafactor's own step size instead of the lr" },
    { .key = "scale_parameter", .type = SCHEMA_BOOL, .offset = AF(scale_parameter),
      .def = "true", .kept = true, .help = "adafactor's step scaled by the parameter's RMS" },
    { .key = "factored", .type = SCHEMA_BOOL, .offset = AF(factored), .def = "true",
      .kept = true, .help = "adafactor's second moment factored into rows and columns" },
    { .key = "weight_decay", .type = SCHEMA_DOUBLE, .offset = AF(weight_decay), .lo = 0.0,
      .hi = 10.0, .def = "0", .kept = true, .help = "adafactor's decoupled weight decay" },
    { .key = "decay_rule", .type = SCHEMA_CHOICE, .offset = AF(decay_rule),
      .name = optim_decay_rule_name, .def = "matrices", .kept = true,
      .help = "which tensors decay: matrices, all or none" },
};
#undef AF
const Schema ADAFACTOR_SCHEMA = { .name = "AdafactorConfig", .rows = ADAFACTOR_ROWS,
                                  .n = sizeof ADAFACTOR_ROWS / sizeof ADAFACTOR_ROWS[0] };
