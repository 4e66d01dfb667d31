/* Coursework mode (docs/coursework.md): the student tree made by scripts/assignment.sh, and the
 * autograder scripts/grade.sh run on a tiny fake tree (tests/grader_fixture/) with a passing,
 * a failing (edited to pass in the student's copy), a crashing, a hanging, a hidden and a
 * missing test. Both scripts run from the
 * source tree, in a scratch directory under /tmp. */
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

/* The entry `name` scored `score` of `max` and its output contains `says`. */
static void expect(const cJSON *tests, const char *name, double score, double max, const char *says)
{
    const cJSON *t = entry(tests, name);
    const char *out = string(t, "output");
    printf("%-40s %g / %g  %.*s\n", name, number(t, "score"), number(t, "max_score"),
           (int)strcspn(out, "\n"), out);
    assert_true(number(t, "score") == score);
    assert_true(number(t, "max_score") == max);
    if (strstr(string(t, "output"), says) == NULL)
        fail_msg("the output of '%s' does not say '%s': %s", name, says, string(t, "output"));
}

static void test_grader_on_a_fake_tree(void **state)
{
    (void)state;
    char cmd[1024], json[256];
    snprintf(json, sizeof json, "%s/grade/results.json", scratch);
    snprintf(cmd, sizeof cmd,
             "sh '%s/scripts/grade.sh' --instructor '%s/tests/grader_fixture/instructor' "
             "--student '%s/tests/grader_fixture/student' --timeout 2 --work '%s/grade/work' "
             "--out '%s' > '%s/grade.log' 2>&1",
             SRC, SRC, SRC, scratch, json, scratch);
    fflush(stdout);
    assert_int_equal(system(cmd), 0);
    char *text = slurp(json);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    assert_true(number(root, "score") == 5);
    assert_true(number(root, "max_score") == 12);
    const cJSON *tests = cJSON_GetObjectItemCaseSensitive(root, "tests");
    assert_int_equal(cJSON_GetArraySize(tests), 8);
    expect(tests, "part_a: test_fake test_passes", 2, 2, "[       OK ] test_passes");
    /* The student's copy of test_fake.c passes test_fails; the instructor's, which counts,
     * does not. */
    expect(tests, "part_a: test_fake test_fails", 0, 3, "0x4 != 0x5");
    expect(tests, "part_b: test_crash test_before_crash", 1, 1, "OK");
    expect(tests, "part_b: test_crash test_aborts", 0, 1, "crashed (signal 6)");
    expect(tests, "part_b: test_crash test_after_crash", 0, 1, "crashed (signal 6)");
    expect(tests, "part_c: test_hang", 0, 1, "ran out of time (2 s)");
    expect(tests, "part_a: test_hidden", 2, 2, "");
    expect(tests, "part_d: test_missing", 0, 1, "did not build");
    assert_string_equal(string(entry(tests, "part_a: test_hidden"), "visibility"), "hidden");
    assert_string_equal(string(entry(tests, "part_a: test_fake test_passes"), "visibility"),
                        "visible");
    cJSON_Delete(root);
    free(text);
    /* The hidden test's source went into the grader's copy, never into the student's tree. */
    snprintf(cmd, sizeof cmd, "test -f '%s/grade/work/tests/test_hidden.c' && "
             "! test -e '%s/tests/grader_fixture/student/tests/test_hidden.c'", scratch, SRC);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strip_then_restore_gives_the_sources),
        cmocka_unit_test(test_parts_strips_only_those),
        cmocka_unit_test(test_unknown_part_is_an_error_naming_it),
        cmocka_unit_test(test_broken_regions_are_refused_with_file_and_line),
        cmocka_unit_test(test_grader_on_a_fake_tree),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
