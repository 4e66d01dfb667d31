/* A scaling-law study analysed (analysis/scaling_study.h) and planned (analysis/scaling_sweep.h):
 * on points drawn from a known L(N, D), approach 2 finds the exponent beta / (alpha + beta) and
 * approach 3 the law; a hand-made cosine reference, trunk point and their counts give the
 * comparison row, the compute saved and the FLOP ratio worked out below; the figure's rows;
 * the plan keeps only pairs inside its limits, the references at the middle budget; a tiny
 * sweep gives the same points bit for bit in one process and in two, and a point written to
 * scaling_study.tsv reads back bit for bit. */
#include "tests/test_helpers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/scaling_study.h"
#include "analysis/scaling_sweep.h"
#include "examples/common/tsv.h"

static const ChinLaw LAW = { .E = 1.2, .A = 60.0, .B = 300.0, .alpha = 0.45, .beta = 0.35 };
static const double BUDGETS[4] = { 1e9, 3e9, 1e10, 3e10 };

enum { SIZES = 7, SEEDS = 2, MAX_PTS = 128 };

static void near(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s: got %.12g, want %.12g (tolerance %g)", what, got, want, tol);
}

/* Cooldown points of every budget: sizes spread by 1.6x around the law's optimum, each seed's
 * loss 0.1% off the law (+ for seed 0, - for seed 1); trained 0.2 D, as a branch. */
static int synthetic(ScalingPoint *pts)
{
    int n = 0;
    for (int b = 0; b < 4; b++) {
        double N_opt, D_opt;
        chin_optimal(&LAW, BUDGETS[b], &N_opt, &D_opt);
        for (int k = 0; k < SIZES; k++)
            for (int seed = 0; seed < SEEDS; seed++) {
                double N = N_opt * pow(1.6, k - SIZES / 2), D = BUDGETS[b] / (6 * N);
                pts[n++] = (ScalingPoint){
                    .layers = 1, .width = 10 + k, .heads = 1, .seed = (uint64_t)seed,
                    .N_nonemb = 0.8 * N, .N_all = N, .count = SCALING_COUNT_ALL,
                    .schedule = SCALING_SCHED_COOLDOWN, .budget = BUDGETS[b],
                    .steps = 100 + k, .D = D,
                    .val_loss = chin_loss(&LAW, N, D) * (seed ? 0.999 : 1.001),
                    .trained = 0.2 * D, .flop = NAN };
            }
    }
    return n;
}

static ScalingStudy study;

static const ScalingQuantity *quantity(const char *name)
{
    for (int i = 0; i < study.nq; i++)
        if (strcmp(study.q[i].name, name) == 0)
            return &study.q[i];
    return NULL;
}

static void test_law_recovered(void **state)
{
    (void)state;
    static ScalingPoint pts[MAX_PTS];
    int n = synthetic(pts);
    assert_int_equal(scaling_study_analyse(pts, n, 20, 7, 0, &study), SCALING_STUDY_OK);
    assert_int_equal(study.n_points, 4 * SIZES * SEEDS);
    assert_int_equal(study.nb, 4);
    double a = LAW.beta / (LAW.alpha + LAW.beta), N, D;
    for (int b = 0; b < 4; b++) {
        assert_true(study.prof[b].ok && study.prof[b].inside);
        chin_optimal(&LAW, BUDGETS[b], &N, &D);
        near(study.prof[b].N_opt / N, 1, 0.1, "approach 2's vertex over the law's");
    }
    near(study.a2.a, a, 0.02, "approach 2's a");
    near(study.a3, a, 0.005, "approach 3's a");
    near(study.f3.law.alpha, LAW.alpha, 0.02, "approach 3's alpha");
    chin_optimal(&LAW, 3e10, &N, &D);
    near(study.tpp3 / (D / N), 1, 0.05, "approach 3's D/N at the largest budget");
    near(study.tpp3_at[3], study.tpp3, 0, "the last budget's D/N is C_max's");
    assert_int_equal(study.i2.good, 20);
    assert_true(study.i2.a_lo <= study.i2.a_hi && study.i3.tpp_lo <= study.i3.tpp_hi);
    /* no trunk points: Kaplan's profiles and choices are not fitted */
    assert_false(study.kaplan_fitted);
    assert_true(isnan(study.choice_a[SCALING_CHOICE_KAPLAN]));
    near(study.choice_a[SCALING_CHOICE_NONEMB], a, 0.01, "non-embedding N = 0.8 N: same a");
    /* the quantities: named in scaling_fit.tsv's order, the agreement last */
    assert_string_equal(study.q[0].name, "a2_a");
    near(study.q[0].value, study.a2.a, 0, "a2_a");
    assert_string_equal(study.q[study.nq - 1].name, "a_difference");
    near(study.q[study.nq - 1].value, fabs(study.a2.a - study.a3), 0, "a_difference");
    assert_non_null(quantity("a2_tpp_C3e+10"));
    near(quantity("cosine_points_compared")->value, 0, 0, "no cosine runs");
    /* every point a branch trained for 0.2 D: 80% saved */
    near(study.compute.saved_percent, 80, 1e-9, "compute saved");
}

/* Adds to the synthetic study two cosine runs of one pair, two trunk points at its length
 * (10 tokens each, counted at 1.1 x 6N a token) and one trunk point past the size's last
 * branch (a Kaplan point: its steps serve Kaplan's points alone). */
static void test_cosine_and_compute(void **state)
{
    (void)state;
    static ScalingPoint pts[MAX_PTS];
    int n = synthetic(pts);
    const ScalingPoint *pair = &pts[2 * SEEDS];     /* budget 1e9, size k = 2, seed 0 */
    double branch_mean = (pts[2 * SEEDS].val_loss + pts[2 * SEEDS + 1].val_loss) / 2;
    double branch_range = pts[2 * SEEDS].val_loss - pts[2 * SEEDS + 1].val_loss;
    for (int seed = 0; seed < 2; seed++) {
        ScalingPoint c = *pair;
        c.seed = (uint64_t)seed;
        c.schedule = SCALING_SCHED_COSINE;
        c.val_loss = seed ? 3.0 : 3.1;
        c.trained = c.D;
        c.flop = 100;
        pts[n++] = c;
        ScalingPoint t = *pair;
        t.seed = (uint64_t)seed;
        t.schedule = SCALING_SCHED_CONSTANT;
        t.val_loss = 3.5;
        t.trained = 10;
        t.flop = 6.6 * t.N_all * 10;
        pts[n++] = t;
    }
    ScalingPoint past = *pair;
    past.count = SCALING_COUNT_NONEMB;      /* a Kaplan point, as in a study */
    past.schedule = SCALING_SCHED_CONSTANT;
    past.steps = 1000;          /* past the size's last branch (steps 102) */
    past.trained = 50;
    past.flop = 6.6 * past.N_all * 50;
    pts[n++] = past;
    assert_int_equal(scaling_study_analyse(pts, n, 0, 1, 12.5, &study), SCALING_STUDY_OK);
    assert_int_equal(study.n_cosine, 1);
    const ScalingCosineRow *r = &study.cosine[0];
    assert_int_equal(r->seeds, 2);
    near(r->cosine, 3.05, 1e-12, "the cosine runs' mean");
    near(r->branch, branch_mean, 1e-12, "the branches' mean");
    near(r->constant, 3.5, 1e-12, "the trunk's mean");
    near(r->diff, branch_mean - 3.05, 1e-12, "branch - cosine");
    near(r->spread, 0.1, 1e-12, "the larger seed range (the cosine's)");
    assert_true(branch_range < 0.1);
    assert_false(r->agree);     /* the branches are ~0.3 nats below */
    assert_int_equal(study.n_agree, 0);
    /* the cosine runs are references, the past-the-end trunk Kaplan's alone */
    near(study.compute.cosine_6nd, 2 * 6 * pair->N_all * pair->D, 1e-3, "cosine 6ND");
    near(study.compute.cosine_counted, 200, 0, "cosine counted");
    near(study.compute.kaplan_6nd, 6 * pair->N_all * 50, 1e-6, "Kaplan's extension");
    const ScalingCompute *c = &study.compute;
    near(c->trained_6nd, 0.2 * c->separate_6nd + 2 * 6 * pair->N_all * 10,
         1e-12 * c->trained_6nd, "the branches' 0.2 D and the trunk's 2 x 10 tokens");
    near(c->saved_percent, 100 * (1 - c->trained_6nd / c->separate_6nd), 1e-12, "saved");
    near(quantity("study_seconds")->value, 12.5, 0, "study_seconds");
    /* the FLOP row: the size's first trunk point */
    assert_int_equal(study.n_flop, 1);
    near(study.flop[0].per_token / (6 * study.flop[0].N_all), 1.1, 1e-12, "counted / 6N");
}

static void test_too_few(void **state)
{
    (void)state;
    static ScalingPoint pts[MAX_PTS];
    synthetic(pts);
    /* four points of one budget */
    assert_int_equal(scaling_study_analyse(pts, 4, 0, 1, 0, &study), SCALING_STUDY_TOO_FEW);
    assert_int_equal(study.n_points, 4);
    assert_int_equal(study.nq, 0);
}

static void test_figure_rows(void **state)
{
    (void)state;
    static ScalingPoint pts[MAX_PTS];
    int n = synthetic(pts);
    assert_int_equal(scaling_study_analyse(pts, n, 0, 1, 0, &study), SCALING_STUDY_OK);
    static double rows[64][8];
    assert_int_equal(scaling_study_pairs(pts, n, &study, rows, 64), 4 * SIZES);
    /* the second pair: budget 0, size 1, the seeds' mean and range */
    near(rows[1][0], 0, 0, "budget index");
    near(rows[1][2], pts[2].N_all, 0, "N");
    near(rows[1][4], (pts[2].val_loss + pts[3].val_loss) / 2, 1e-15, "mean loss");
    near(rows[1][5], pts[3].val_loss, 0, "lo");
    near(rows[1][6], pts[2].val_loss, 0, "hi");
    near(rows[1][7], 2, 0, "seeds");
    near(rows[SIZES][0], 1, 0, "the next budget's index");

    ScalingProfile p = { .budget = 6e6, .ok = true, .N_opt = 1000, .N_lo = 800,
                         .N_hi = 1250, .loss_opt = 2.5, .inside = true };
    double o[12];
    scaling_study_optimal_row(&p, o);
    const double want[12] = { 6e6, 1000, 800, 1250, 1000, 800, 1250, 1, 0.64, 1.5625, 2.5, 1 };
    for (int i = 0; i < 12; i++)
        near(o[i], want[i], 1e-12, SCALING_OPTIMAL_COLUMNS[i]);
    near(scaling_profile_tpp(&p), 1, 1e-15, "D/N");

    double l[15], C = study.budgets[0];
    scaling_study_line_row(&study, C, l);
    near(l[0], C, 0, "C");
    near(l[3] * l[4], C / 6, 1e-9 * C, "approach 3's N D = C / 6");
    near(l[7], study.prof[0].N_opt, 1e-9 * l[7], "Kaplan's slope through the first vertex");
    near(l[12], l[4] / l[3], 1e-12, "tpp_a3");
    assert_true(isnan(l[5]));   /* no Kaplan-style line */
    near(l[14], 80, 0, "20 BPE tokens of 4 characters");
}

static ScalingSweepConfig quick_config(void)
{
    return (ScalingSweepConfig){ .quick = true, .seeds = 2, .compare = 3, .jobs = 1,
                                 .min_steps = 50, .max_epochs = 10, .min_tpp = 5,
                                 .max_tpp = 5000, .cooldown = 0.2,
                                 .train = scaling_train_defaults() };
}

static void test_plan(void **state)
{
    (void)state;
    static ScalingSweep sw;
    ScalingSweepConfig cfg = quick_config();
    scaling_sweep_plan(&cfg, 65, 1e6, &sw);
    assert_int_equal(sw.ns, 8);
    assert_int_equal(sw.nb, 4);
    assert_int_equal(sw.mid, 2);
    int trunks = 0;
    for (int s = 0; s < sw.ns; s++) {
        const ScalingSize *z = &sw.sizes[s];
        near(sw.N_all[s], sw.N_nonemb[s] + (65 + 64) * z->width, 0, "N_all");
        long longest = 0;
        for (int k = 0; k < sw.n_targets[s]; k++) {
            const ScalingTarget *t = &sw.targets[s][k];
            double N = t->count == SCALING_COUNT_ALL ? sw.N_all[s] : sw.N_nonemb[s];
            double D = (double)t->steps * 4 * 64;
            assert_int_equal(t->steps, scaling_steps_for(t->budget, N, &cfg.train));
            assert_true(t->steps >= 50 && D / 1e6 <= 10 && D / N >= 5 && D / N <= 5000);
            assert_true(t->branch == (t->count == SCALING_COUNT_ALL));
            longest = t->steps > longest ? t->steps : longest;
        }
        assert_int_equal(sw.trunk_steps[s], longest);
        trunks += sw.n_targets[s] > 0;
    }
    assert_true(sw.n_ref >= 2 && sw.n_ref <= 3);
    assert_int_equal(sw.n_items, 2 * (trunks + sw.n_ref));
    for (int i = 0; i < sw.n_items; i++) {
        const ScalingItem *it = &sw.items[i];
        if (it->ref >= 0) {
            assert_true(sw.targets[it->size][it->ref].branch);
            near(sw.targets[it->size][it->ref].budget, sw.budgets[sw.mid], 0, "reference C");
        }
    }
    /* the smallest size's D / N at 1e10 is 2800: --max-tpp 1000 drops it */
    cfg.max_tpp = 1000;
    scaling_sweep_plan(&cfg, 65, 1e6, &sw);
    for (int k = 0; k < sw.n_targets[0]; k++)
        assert_true(sw.targets[0][k].budget > 1e10);
}

static char text_path[64];

/* Every field but the clock, bit for bit. */
static void same_point(const ScalingPoint *a, const ScalingPoint *b)
{
    assert_int_equal(a->layers, b->layers);
    assert_int_equal(a->width, b->width);
    assert_int_equal(a->seed, b->seed);
    assert_int_equal(a->count, b->count);
    assert_int_equal(a->schedule, b->schedule);
    assert_int_equal(a->steps, b->steps);
    const double x[] = { a->N_nonemb, a->N_all, a->budget, a->D, a->lr, a->val_loss, a->trained,
                         a->flop };
    const double y[] = { b->N_nonemb, b->N_all, b->budget, b->D, b->lr, b->val_loss, b->trained,
                         b->flop };
    assert_memory_equal(x, y, sizeof x);
}

static void test_sweep_jobs(void **state)
{
    (void)state;
    snprintf(text_path, sizeof text_path, "/tmp/test_scaling_study_%d", (int)getpid());
    assert_int_equal(mkdir(text_path, 0777), 0);
    char file[96];
    snprintf(file, sizeof file, "%s/text.txt", text_path);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    const char *words[] = { "the ", "cat ", "sat ", "on ", "a ", "mat.\n" };
    Rng rng = rng_new(5, 1);
    for (int i = 0; i < 20000; i++)
        fputs(words[rng_below(&rng, 6)], f);
    fclose(f);
    char err[256];
    Dataset *ds = dataset_open_text(file, 64, err, sizeof err);
    assert_non_null(ds);
    /* the quick study's largest size (L3 C24) alone, at 1e10 only: D / N 3.0 by every
     * parameter (a branch), 3.5 by the non-embedding ones (the trunk alone); 3 points a seed */
    ScalingSweepConfig cfg = quick_config();
    cfg.min_tpp = 2;
    cfg.max_tpp = 4;
    cfg.max_epochs = 1e9;
    cfg.compare = 0;
    cfg.train.eval_windows = 4;
    static ScalingSweep sw;
    scaling_sweep_plan(&cfg, dataset_vocab_size(ds), 1e5, &sw);
    assert_int_equal(sw.n_items, 2);
    static ScalingPoint one[64], two[64];
    int n1 = scaling_sweep_run(ds, &sw, text_path, NULL, one, 64, err, sizeof err);
    sw.cfg.jobs = 2;
    int n2 = scaling_sweep_run(ds, &sw, text_path, NULL, two, 64, err, sizeof err);
    assert_int_equal(n1, 6);
    assert_int_equal(n2, 6);
    for (int i = 0; i < n1; i++)
        same_point(&one[i], &two[i]);
    /* the file's order: by seed, then steps */
    assert_true(one[0].seed == 1 && one[3].seed == 2 && one[0].steps < one[2].steps);
    assert_int_equal(scaling_sweep_run(ds, &sw, text_path, NULL, two, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "more than"));
    dataset_free(ds);
    remove(file);
    rmdir(text_path);
}

static void test_points_round_trip(void **state)
{
    (void)state;
    static ScalingPoint pts[MAX_PTS], back[MAX_PTS];
    int n = synthetic(pts), got = 0;
    pts[0].flop = 1.0 / 3;
    pts[1].seconds = 0.1 + 0.2;
    pts[2].count = SCALING_COUNT_NONEMB;
    pts[2].schedule = SCALING_SCHED_COSINE;
    char dir[64], path[96], err[256];
    snprintf(dir, sizeof dir, "/tmp/test_scaling_rt_%d", (int)getpid());
    assert_int_equal(mkdir(dir, 0777), 0);
    TsvWriter *w = tsv_open_in(dir, "scaling_study.tsv", SCALING_POINT_COLUMNS);
    for (int i = 0; i < n; i++)
        assert_true(scaling_write_point(w, &pts[i]));
    tsv_close_or_die(w);
    snprintf(path, sizeof path, "%s/scaling_study.tsv", dir);
    assert_true(scaling_points_read(path, back, MAX_PTS, &got, err, sizeof err));
    assert_int_equal(got, n);
    for (int i = 0; i < n; i++) {
        same_point(&pts[i], &back[i]);
        assert_memory_equal(&pts[i].seconds, &back[i].seconds, sizeof pts[i].seconds);
    }
    remove(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_law_recovered),
        cmocka_unit_test(test_cosine_and_compute),
        cmocka_unit_test(test_too_few),
        cmocka_unit_test(test_figure_rows),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_sweep_jobs),
        cmocka_unit_test(test_points_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
