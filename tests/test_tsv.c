/* What the programs write: TSV logs (numbers that read back exactly; the file appears only when
 * complete, an older one left intact until then), the progress line, and gnuplot figures (made
 * via a temporary file; a missing gnuplot or a broken script reported, not fatal). */
#include "tests/test_helpers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"
#include "tests/outfile_check.h"

static char tmpdir[] = "/tmp/test_tsv_XXXXXX";

static const char *in_tmp(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

/* The whole file as a string (static buffer), or NULL if it does not exist. */
static const char *slurp(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- numbers ------------------------------------------------------------------------------- */

static void test_shortest_forms(void **state)
{
    (void)state;
    char buf[32];
    const double d[] = { 0.1, 300, 1e-5, -0.0, 2.5e-300, 1e300, 123456789012.5, 1.0 / 3 };
    const char *ds[] = { "0.1", "300", "1e-05", "-0", "2.5e-300", "1e+300", "123456789012.5",
                         "0.3333333333333333" };
    for (int i = 0; i < 8; i++)
        assert_string_equal(tsv_format_double(d[i], buf, sizeof buf), ds[i]);
    assert_string_equal(tsv_format_double(NAN, buf, sizeof buf), "nan");
    assert_string_equal(tsv_format_double(-INFINITY, buf, sizeof buf), "-inf");
    assert_string_equal(tsv_format_float(INFINITY, buf, sizeof buf), "inf");
    assert_string_equal(tsv_format_float(0.1f, buf, sizeof buf), "0.1");
    assert_string_equal(tsv_format_float(3.14159265f, buf, sizeof buf), "3.1415927");
    assert_string_equal(tsv_format_float(1.0f / 3, buf, sizeof buf), "0.33333334");
    /* A float passed as a double would print as 0.10000000149011612: the reason for both. */
    assert_string_equal(tsv_format_double(0.1f, buf, sizeof buf), "0.10000000149011612");
}

/* Random bit patterns: every finite double and float reads back to the same bits. */
static void test_round_trip(void **state)
{
    (void)state;
    Rng rng = rng_new(9, 1);
    char buf[32];
    for (int i = 0; i < 200000; i++) {
        uint64_t bits = (uint64_t)rng_u32(&rng) << 32 | rng_u32(&rng);
        double d;
        memcpy(&d, &bits, sizeof d);
        if (isfinite(d)) {
            double back = strtod(tsv_format_double(d, buf, sizeof buf), NULL);
            assert_memory_equal(&back, &d, sizeof d);
        }
        uint32_t fbits = rng_u32(&rng);
        float f;
        memcpy(&f, &fbits, sizeof f);
        if (isfinite(f)) {
            float back = strtof(tsv_format_float(f, buf, sizeof buf), NULL);
            assert_memory_equal(&back, &f, sizeof f);
        }
    }
}

/* ---- files --------------------------------------------------------------------------------- */

static void test_tsv_file(void **state)
{
    (void)state;
    const char *path = in_tmp("log.tsv");
    char tmp[1024];
    spit(path, "an older run\n");
    const char *cols[] = { "step", "loss", "note", NULL };
    char err[256];
    TsvWriter *w = tsv_open(path, cols, err, sizeof err);
    assert_non_null(w);
    tsv_int(w, 1);
    tsv_float(w, 0.5f);
    tsv_str(w, "tab\there");
    assert_true(tsv_end_row(w));
    /* Flushed row by row into the temporary file beside it; the old file untouched. */
    assert_true(outfile_temp_beside(path, tmp, sizeof tmp));
    assert_string_equal(slurp(tmp), "step\tloss\tnote\n1\t0.5\ttab here\n");
    assert_string_equal(slurp(path), "an older run\n");
    assert_true(tsv_row(w, (double[]){ 2, 0.25, 1e-3 }));
    /* a value that does not apply is an empty cell, any other number as tsv_num writes it */
    tsv_int(w, 3);
    tsv_num_or_empty(w, NAN);
    tsv_num_or_empty(w, 0.125);
    assert_true(tsv_end_row(w));
    assert_true(tsv_close(w, err, sizeof err));
    assert_string_equal(slurp(path), "step\tloss\tnote\n1\t0.5\ttab here\n2\t0.25\t0.001\n"
                                     "3\t\t0.125\n");
    assert_true(outfile_no_temp_beside(path));
}

static void short_row(void *arg)
{
    TsvWriter *w = arg;
    tsv_int(w, 1);
    tsv_end_row(w);
}

static void long_row(void *arg)
{
    TsvWriter *w = arg;
    tsv_int(w, 1);
    tsv_int(w, 2);
    tsv_int(w, 3);
}

static void test_tsv_errors(void **state)
{
    (void)state;
    char err[256] = "";
    const char *cols[] = { "a", "b", NULL };
    assert_null(tsv_open(in_tmp("no/such/dir.tsv"), cols, err, sizeof err));
    assert_non_null(strstr(err, "No such file"));
    TsvWriter *w = tsv_open(in_tmp("cols.tsv"), cols, err, sizeof err);
    assert_true(test_aborts(short_row, w));
    assert_true(test_aborts(long_row, w));
    assert_true(tsv_close(w, err, sizeof err));
    assert_string_equal(slurp(in_tmp("cols.tsv")), "a\tb\n");
}

/* ---- progress ------------------------------------------------------------------------------ */

static void test_progress_format(void **state)
{
    (void)state;
    char buf[256];
    assert_string_equal(progress_format(buf, sizeof buf, 120, 1000, 1.23456, 48200, 83, "lr 3e-04"),
                        "step 120/1000  loss 1.2346  48.2k tok/s  ETA 1m23s  lr 3e-04");
    assert_string_equal(progress_format(buf, sizeof buf, 1, 10, 2, 999, -1, NULL),
                        "step 1/10  loss 2.0000  999 tok/s");
    assert_string_equal(progress_format_duration(3725, buf, sizeof buf), "1h02m");
    assert_string_equal(progress_format_duration(59.6, buf, sizeof buf), "1m00s");
    assert_string_equal(progress_format_duration(-3, buf, sizeof buf), "0s");
    assert_string_equal(progress_format_rate(1.234e6, buf, sizeof buf), "1.23M");
}

/* Not a terminal: the first, every 10th and the last step, one plain line each. */
static void test_progress_plain_lines(void **state)
{
    (void)state;
    Progress p;
    progress_start(&p, 0, 35, 10);
    p.tty = false;
    p.out = tmpfile();
    for (long s = 1; s <= 35; s++)
        progress_update(&p, s, 1.0, 64, NULL);
    progress_note(&p, "eval %d", 7);
    progress_finish(&p);
    rewind(p.out);
    char line[256];
    const char *want[] = { "step 1/35 ", "step 10/35 ", "step 20/35 ", "step 30/35 ",
                           "step 35/35 ", "eval 7" };
    for (int i = 0; i < 6; i++) {
        assert_non_null(fgets(line, sizeof line, p.out));
        assert_true(strncmp(line, want[i], strlen(want[i])) == 0);
        assert_null(strchr(line, '\r'));
    }
    assert_null(fgets(line, sizeof line, p.out));
    fclose(p.out);
}

/* A terminal: redraws with \r, a longer line erased by spaces, one newline at the end. */
static void test_progress_tty(void **state)
{
    (void)state;
    Progress p;
    progress_start(&p, 0, 3, 1);
    p.tty = true;
    p.out = tmpfile();
    progress_update(&p, 1, 1.0, 10, "a long extra field");
    progress_update(&p, 3, 1.0, 10, NULL);   /* the last step always shows */
    progress_finish(&p);
    rewind(p.out);
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, p.out);
    buf[n] = '\0';
    fclose(p.out);
    assert_int_equal(buf[0], '\r');
    assert_non_null(strstr(buf, "a long extra field\rstep 3/3"));
    assert_int_equal(strchr(buf, '\n') - buf, (long)n - 1);   /* one newline, the last byte */
    const char *second = strrchr(buf, '\r') + 1;
    /* The second line is padded to the first one's length. */
    assert_int_equal(strlen(second) - 1, (size_t)(strchr(buf + 1, '\r') - buf - 1));
}

/* ---- plots --------------------------------------------------------------------------------- */

static bool have_gnuplot(void) { return system("gnuplot --version >/dev/null 2>&1") == 0; }

static const char *SCRIPT = "set terminal pngcairo size 320,240\n"
                            "set output output\n"
                            "set key autotitle columnhead\n"
                            "plot input using 1:2 with lines\n";

static void test_plot(void **state)
{
    (void)state;
    if (!have_gnuplot())
        skip();
    const char *script = in_tmp("plot.gp"), *data = in_tmp("it's data.tsv");
    const char *png = in_tmp("fig.png");
    spit(script, SCRIPT);
    spit(data, "x\ty\n1\t2\n2\t4\n3\t3\n");
    assert_int_equal(plot_run(script, data, png), PLOT_OK);
    const char *made = slurp(png);
    assert_non_null(made);
    assert_memory_equal(made, "\x89PNG", 4);
    assert_true(outfile_no_temp_beside(png));

    /* A broken script: reported, and the earlier figure kept. */
    spit(png, "earlier figure");
    spit(script, "set output output\nplot input using 1:2 with nonsense\n");
    assert_int_equal(plot_run(script, data, png), PLOT_FAILED);
    assert_string_equal(slurp(png), "earlier figure");
    assert_true(outfile_no_temp_beside(png));
}

static void test_plot_without_gnuplot(void **state)
{
    (void)state;
    char *saved = strdup(getenv("PATH") ? getenv("PATH") : "");
    setenv("PATH", tmpdir, 1);
    assert_int_equal(plot_run(in_tmp("plot.gp"), in_tmp("x.tsv"), in_tmp("x.png")),
                     PLOT_NO_GNUPLOT);
    setenv("PATH", saved, 1);
    free(saved);
    assert_false(exists(in_tmp("x.png")));
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shortest_forms),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_tsv_file),
        cmocka_unit_test(test_tsv_errors),
        cmocka_unit_test(test_progress_format),
        cmocka_unit_test(test_progress_plain_lines),
        cmocka_unit_test(test_progress_tty),
        cmocka_unit_test(test_plot),
        cmocka_unit_test(test_plot_without_gnuplot),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
