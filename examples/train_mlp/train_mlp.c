/* train_mlp: a small multilayer perceptron learns to tell apart the three arms of a spiral.
 *
 * The smallest complete training loop in the project, built from the same pieces as the GPT
 * trainer: ops recorded on a tape, one backward pass, an SGD step, the tape reset, and every
 * byte counted. Each arm of the spiral is a class; points are generated from a seed, so a run
 * is reproducible, and a held-out set measures accuracy.
 *
 *     x [B, 2] -> (matmul, bias, gelu) x (layers-1) -> matmul, bias -> logits [B, 3]
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/rng.h"
#include "cli/settings.h"
#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"
#include "optim/sgd.h"

enum { CLASSES = 3, MAX_LAYERS = 16 };

typedef struct {
    long   steps;
    int    batch, hidden, layers, threads;
    double lr, momentum;
    long   seed;
    const char *log_path, *plot_path;
} Options;

typedef struct {
    Tensor *w[MAX_LAYERS], *b[MAX_LAYERS];
    Tensor *params[2 * MAX_LAYERS];
    int     layers;
} Mlp;

/* A point on arm `cls` of a three-armed spiral, with Gaussian noise. */
static void spiral_point(Rng *rng, int cls, float *x, float *y)
{
    float r = rng_uniform(rng);
    float angle = (float)cls * 2.0943951f + 4.0f * r + 0.2f * rng_normal(rng);
    *x = r * sinf(angle);
    *y = r * cosf(angle);
}

static void spiral_batch(Rng *rng, Tensor *x, int *labels)
{
    for (int i = 0; i < x->shape[0]; i++) {
        labels[i] = (int)rng_below(rng, CLASSES);
        spiral_point(rng, labels[i], &x->data[2 * i], &x->data[2 * i + 1]);
    }
}

static Mlp mlp_new(int layers, int hidden, uint64_t seed)
{
    Mlp m = { .layers = layers };
    Rng rng = rng_new(seed, RNG_STREAM_INIT);
    for (int l = 0; l < layers; l++) {
        int in = l == 0 ? 2 : hidden, out = l == layers - 1 ? CLASSES : hidden;
        char name[32];
        snprintf(name, sizeof name, "layers.%d.weight", l);
        m.w[l] = tensor_param(name, 2, (int[]){ in, out });
        snprintf(name, sizeof name, "layers.%d.bias", l);
        m.b[l] = tensor_param(name, 1, (int[]){ out });
        /* He-style scale keeps the activations' size roughly constant through the layers. */
        float scale = sqrtf(2.0f / (float)in);
        for (size_t i = 0; i < m.w[l]->size; i++)
            m.w[l]->data[i] = scale * rng_normal(&rng);
        tensor_fill(m.b[l], 0.0f);
        m.params[2 * l] = m.w[l];
        m.params[2 * l + 1] = m.b[l];
    }
    return m;
}

static Tensor *mlp_forward(const Mlp *m, Tape *tape, Tensor *x)
{
    Tensor *h = x;
    for (int l = 0; l < m->layers; l++) {
        h = op_bias_add(tape, op_matmul(tape, h, m->w[l], false), m->b[l]);
        if (l < m->layers - 1)
            h = op_gelu(tape, h);
    }
    return h;
}

static double accuracy(const Mlp *m, Tensor *x, const int *labels)
{
    Tape *tape = tape_new();
    tape->recording = false;
    Tensor *logits = mlp_forward(m, tape, x);
    int right = 0;
    for (int i = 0; i < x->shape[0]; i++) {
        const float *row = &logits->data[i * CLASSES];
        int best = 0;
        for (int c = 1; c < CLASSES; c++)
            if (row[c] > row[best])
                best = c;
        right += best == labels[i];
    }
    tape_free(tape);
    return (double)right / x->shape[0];
}

enum { FLAG_STEPS = 256, FLAG_BATCH, FLAG_HIDDEN, FLAG_LAYERS, FLAG_LR, FLAG_MOMENTUM,
       FLAG_SEED, FLAG_THREADS, FLAG_KERNELS, FLAG_LOG, FLAG_PLOT };

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .name = "steps", .id = FLAG_STEPS, .type = SETTING_LONG, .offset = FIELD(steps),
      .lo = 1, .hi = 100000000, .def = "600", .arg = "N", .help = "optimizer steps" },
    { .name = "batch", .id = FLAG_BATCH, .type = SETTING_INT, .offset = FIELD(batch),
      .lo = 1, .hi = 1 << 20, .def = "128", .arg = "N", .help = "points per step" },
    { .name = "hidden", .id = FLAG_HIDDEN, .type = SETTING_INT, .offset = FIELD(hidden),
      .lo = 1, .hi = 1 << 16, .def = "64", .arg = "N", .help = "width of the hidden layers" },
    { .name = "layers", .id = FLAG_LAYERS, .type = SETTING_INT, .offset = FIELD(layers),
      .lo = 2, .hi = MAX_LAYERS, .def = "3", .arg = "N",
      .help = "linear layers, 2 to MAX_LAYERS (16)" },
    { .name = "lr", .id = FLAG_LR, .type = SETTING_DOUBLE, .offset = FIELD(lr),
      .lo = 0.0, .hi = 100.0, .def = "0.1", .arg = "X", .help = "learning rate" },
    { .name = "momentum", .id = FLAG_MOMENTUM, .type = SETTING_DOUBLE, .offset = FIELD(momentum),
      .lo = 0.0, .hi = 0.999, .def = "0.9", .arg = "X", .help = "SGD momentum" },
    { .name = "seed", .id = FLAG_SEED, .type = SETTING_LONG, .offset = FIELD(seed),
      .lo = 0, .hi = (double)(1L << 62), .def = "1", .arg = "N",
      .help = "seed for the weights and the data" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(threads),
      .lo = 0, .hi = 1024, .def = "0", .arg = "N", .help = "threads, 0 = one per core" },
    { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .name = "log", .id = FLAG_LOG, .type = SETTING_STRING, .offset = FIELD(log_path),
      .def = "train_mlp.tsv", .arg = "FILE", .help = "TSV log: step, loss" },
    { .name = "plot", .id = FLAG_PLOT, .type = SETTING_STRING, .offset = FIELD(plot_path),
      .def = "train_mlp.png", .arg = "FILE", .help = "loss-curve PNG, drawn by gnuplot" },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: train_mlp [OPTION]...\n"
           "Train a multilayer perceptron to classify the three arms of a spiral; print the loss,\n"
           "the held-out accuracy and the memory used; write a TSV log and a loss-curve PNG.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
}

static Options parse(int argc, char **argv)
{
    Options o = { 0 };
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_STEPS, usage, argc, argv);
    return o;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    par_set_threads(o.threads);

    Mlp m = mlp_new(o.layers, o.hidden, (uint64_t)o.seed);
    SgdConfig cfg = sgd_defaults();
    cfg.momentum = o.momentum;
    Sgd *sgd = sgd_new(m.params, 2 * o.layers, cfg);

    Rng data = rng_new((uint64_t)o.seed, RNG_STREAM_DATA);
    Tensor *x = tensor_new2(MEM_TEMP, o.batch, 2), *x_val = tensor_new2(MEM_TEMP, 1000, 2);
    int *labels = malloc(sizeof(int) * (size_t)o.batch), val_labels[1000];
    spiral_batch(&data, x_val, val_labels);

    char err[256];
    const char *columns[] = { "step", "loss", NULL };
    TsvWriter *log = tsv_open(o.log_path, columns, err, sizeof err);
    if (!log)
        cli_die(1, "%s", err);

    Progress progress;
    progress_start(&progress, 0, o.steps, o.steps / 10);
    Tape *tape = tape_new();
    mem_reset_peaks();
    double loss = 0.0;
    for (long step = 1; step <= o.steps; step++) {
        spiral_batch(&data, x, labels);
        Tensor *l = op_cross_entropy(tape, mlp_forward(&m, tape, x), labels);
        tape_backward(tape, l);
        optim_step(&sgd->base, o.lr);
        optim_zero_grad(&sgd->base);
        loss = l->data[0];
        tape_reset(tape);
        tsv_int(log, step);
        tsv_float(log, (float)loss);
        tsv_end_row(log);
        progress_update(&progress, step, loss, o.batch, NULL);
    }
    progress_finish(&progress);
    if (!tsv_close(log, err, sizeof err))
        cli_die(1, "%s", err);

    printf("final loss %.4f, held-out accuracy %.1f%% on 1000 points\n", loss,
           100.0 * accuracy(&m, x_val, val_labels));
    mem_report(stdout);
    printf("log: %s\n", o.log_path);
    if (plot_run("examples/train_mlp/loss.gp", o.log_path, o.plot_path) == PLOT_OK)
        printf("figure: %s\n", o.plot_path);

    tape_free(tape);
    optim_free(&sgd->base);
    for (int l = 0; l < o.layers; l++) {
        tensor_free(m.w[l]);
        tensor_free(m.b[l]);
    }
    tensor_free(x);
    tensor_free(x_val);
    free(labels);
    return 0;
}
