/* Coursework mode (docs/coursework.md): the student tree made by scripts/assignment.sh, and the
 * autograder scripts/grade.sh run on a tiny instructor tree (tests/grader_fixture/instructor)
 * against honest and hostile submissions (tests/grader_fixture/submissions/): forged OK lines,
 * a rewritten test, reading the solution at run or build time, a hang, a crash, an _exit(0).
 * Both scripts run from the source tree, in a scratch directory under /tmp. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#define SRC TAPEGRAD_SOURCE_DIR

static char scratch[64];

static int setup(void **state)
{
    (void)state;
    strcpy(scratch, "/tmp/tapegrad-coursework-XXXXXX");
    return mkdtemp(scratch) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    return system(cmd) == 0 ? 0 : -1;
}

/* Runs a check of tests/coursework_check.sh in a fresh subdirectory of the scratch directory. */
static int check(const char *what)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/%s' && sh '%s/tests/coursework_check.sh' %s '%s/%s'",
             scratch, what, SRC, what, scratch, what);
    fflush(stdout);
    return system(cmd);
}

static void test_strip_then_restore_gives_the_sources(void **state)
{
    (void)state;
    assert_int_equal(check("roundtrip"), 0);
}

static void test_parts_strips_only_those(void **state)
{
    (void)state;
    assert_int_equal(check("partial"), 0);
}

static void test_unknown_part_is_an_error_naming_it(void **state)
{
    (void)state;
    assert_int_equal(check("unknown"), 0);
}

static void test_broken_regions_are_refused_with_file_and_line(void **state)
{
    (void)state;
    assert_int_equal(check("malformed"), 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

static const cJSON *entry(const cJSON *tests, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tests) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(t, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return t;
    }
    fail_msg("results.json has no test '%s'", name);
    return NULL;
}

static double number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const char *string(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

/* One submission of tests/grader_fixture/submissions/ graded on the fixture's instructor tree
 * (3 parts in one test binary, a hidden test, a row whose binary does not exist): the score of
 * each part, and what the output of one failing row must say. */
struct graded {
    const char *name;
    int part_a, part_b, part_c; /* of 4, 3, 2; part_d (no source) is always 0 of 1 */
    const char *row;            /* a row to look at, and what its output must say */
    const char *says;
};

static const struct graded submissions[] = {
    /* the instructor's tree graded as a submission: everything that exists */
    { "../instructor", 4, 3, 2, "part_a: test_hidden test_add_far", "[       OK ] test_add_far" },
    { "honest", 4, 3, 0, "part_c: test_fix test_prefix_sum",
      "prefix sum differs first at [0]: expected 3, got 0" },
    /* a constructor outside the regions printing OK lines and a forged verdict, then _exit(0),
     * and the student's copy of the test edited to pass: neither is built */
    { "fake_ok", 4, 0, 0, "part_b: test_fix test_mul", "0 != 0x2a" },
    /* rewrites the test source, binary and table from inside part_b, forges a verdict line */
    { "rewrite_test", 4, 0, 0, "part_b: test_fix test_mul", "test_fix.c: refused" },
    /* part_c answers right only if it can read the instructor's solution or the hidden test */
    { "read_instructor", 4, 3, 0, "part_c: test_fix test_prefix_sum", "test_hidden.c: refused" },
    { "build_time", 4, 3, 0, "part_c: test_fix test_prefix_sum", "the keyword asm" },
    { "escape", 4, 0, 0, "part_c: test_fix test_prefix_sum",
      "a } that closes the function around the region" },
    /* part_b hangs, crashes or exits 0: parts a and c, in the same binary, keep their points */
    { "loop", 4, 0, 2, "part_b: test_fix test_mul", "ran out of time (2 s)" },
    { "segfault", 4, 0, 2, "part_b: test_fix test_mul", "Segmentation fault" },
    { "exit0", 4, 0, 2, "part_b: test_fix test_mul", "exited 0 without the grader's token" },
};

static double part_score(const cJSON *tests, const char *part)
{
    double s = 0;
    const cJSON *t;
    size_t n = strlen(part);
    cJSON_ArrayForEach(t, tests) {
        const char *name = string(t, "name");
        if (strncmp(name, part, n) == 0 && name[n] == ':')
            s += number(t, "score");
    }
    return s;
}

static int have_bwrap(void)
{
    return system("bwrap --ro-bind / / --unshare-all --unshare-user --cap-drop ALL true "
                  "> /dev/null 2>&1") == 0;
}

static void grade_one(const struct graded *g, int sandbox)
{
    char cmd[1536], json[256], work[192];
    snprintf(work, sizeof work, "%s/grade-%s", scratch, g->name + (g->name[0] == '.' ? 3 : 0));
    snprintf(json, sizeof json, "%s/results.json", work);
    snprintf(cmd, sizeof cmd,
             "sh '%s/scripts/grade.sh' --instructor '%s/tests/grader_fixture/instructor' "
             "--student '%s/tests/grader_fixture/submissions/%s' --timeout 2 --work '%s/work' "
             "--out '%s' %s > '%s.log' 2>&1",
             SRC, SRC, SRC, g->name, work, json, sandbox ? "" : "--no-sandbox", work);
    fflush(stdout);
    assert_int_equal(system(cmd), 0);
    char *text = slurp(json);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    const cJSON *tests = cJSON_GetObjectItemCaseSensitive(root, "tests");
    assert_int_equal(cJSON_GetArraySize(tests), 5);
    printf("%-16s part_a %g/4 part_b %g/3 part_c %g/2 part_d %g/1 total %g/%g\n", g->name,
           part_score(tests, "part_a"), part_score(tests, "part_b"), part_score(tests, "part_c"),
           part_score(tests, "part_d"), number(root, "score"), number(root, "max_score"));
    assert_true(number(root, "max_score") == 10);
    assert_true(part_score(tests, "part_a") == g->part_a);
    assert_true(part_score(tests, "part_b") == g->part_b);
    assert_true(part_score(tests, "part_c") == g->part_c);
    assert_true(number(root, "score") == g->part_a + g->part_b + g->part_c);
    const cJSON *row = entry(tests, g->row);
    if (strstr(string(row, "output"), g->says) == NULL)
        fail_msg("%s: the output of '%s' does not say '%s': %s", g->name, g->row, g->says,
                 string(row, "output"));
    assert_non_null(strstr(string(entry(tests, "part_d: test_missing"), "output"), "did not build"));
    assert_string_equal(string(entry(tests, "part_a: test_hidden test_add_far"), "visibility"),
                        "hidden");
    /* Nothing the submission printed holds the instructor's solution or the hidden test. */
    assert_null(strstr(text, "instructor-secret"));
    assert_null(strstr(text, "hidden-secret"));
    cJSON_Delete(root);
    free(text);
}

static void test_grader_on_hostile_submissions(void **state)
{
    (void)state;
    int sandbox = have_bwrap();
    if (!sandbox)
        printf("bwrap cannot run here: grading with --no-sandbox, without the two submissions "
               "that need it (rewrite_test, read_instructor)\n");
    for (size_t i = 0; i < sizeof submissions / sizeof submissions[0]; i++) {
        if (!sandbox && (strcmp(submissions[i].name, "rewrite_test") == 0 ||
                         strcmp(submissions[i].name, "read_instructor") == 0))
            continue;
        grade_one(&submissions[i], sandbox);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strip_then_restore_gives_the_sources),
        cmocka_unit_test(test_parts_strips_only_those),
        cmocka_unit_test(test_unknown_part_is_an_error_naming_it),
        cmocka_unit_test(test_broken_regions_are_refused_with_file_and_line),
        cmocka_unit_test(test_grader_on_hostile_submissions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
