/* cli/settings.h on a small table: defaults, parsing a command line, the keys
 * written and read back, and the merge rule's cases that do not exit. The cases that exit (a
 * bad value, a disagreeing flag, a key out of range) are train_gpt's, in
 * test_train_gpt_cli.c. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "cli/settings.h"

typedef struct {
    int         layers;
    long        steps;
    double      lr;
    bool        fast;
    int         kind;
    const char *name;
    bool        given[6];
} Opts;

enum { F_LAYERS = 300, F_STEPS, F_LR, F_FAST, F_KIND, F_NAME };

static const char *const KINDS[] = { "plain", "fancy", NULL };

static bool is_fancy(const void *o) { return ((const Opts *)o)->kind == 1; }

static const Setting TABLE[] = {
    { .heading = "Model:" },
    { .name = "layers", .id = F_LAYERS, .type = SETTING_INT, .offset = offsetof(Opts, layers),
      .lo = 1, .hi = 8, .def = "2", .arg = "N", .help = "blocks", .key = "m.layers",
      .merge = SETTING_KEPT },
    { .name = "steps", .id = F_STEPS, .type = SETTING_LONG, .offset = offsetof(Opts, steps),
      .lo = 0, .hi = 1000, .def = "10", .arg = "N", .help = "steps", .key = "t.step",
      .library_key = true, .merge = SETTING_ONWARD },
    { .name = "lr", .id = F_LR, .type = SETTING_DOUBLE, .offset = offsetof(Opts, lr),
      .lo = 0, .hi = 1, .def = "0.1", .arg = "X", .help = "rate", .key = "t.lr",
      .merge = SETTING_KEPT, .applies = is_fancy },
    { .name = "fast", .id = F_FAST, .type = SETTING_SWITCH, .offset = offsetof(Opts, fast),
      .help = "go fast" },
    { .name = "kind", .id = F_KIND, .type = SETTING_CHOICE, .offset = offsetof(Opts, kind),
      .choices = KINDS, .def = "plain", .arg = "K", .help = "plain or fancy\nsecond line",
      .key = "m.kind", .merge = SETTING_KEPT },
    { .name = "name", .id = F_NAME, .type = SETTING_STRING, .offset = offsetof(Opts, name),
      .arg = "S", .help = "a name" },
};
enum { N_TABLE = sizeof TABLE / sizeof TABLE[0] };

static void no_usage(void) {}

static void parse(Opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    settings_defaults(TABLE, N_TABLE, o);
    optind = 0;     /* getopt_long again from the start */
    settings_parse(TABLE, N_TABLE, o, o->given, F_LAYERS, no_usage, argc, argv);
}

static void test_defaults_and_flags(void **state)
{
    (void)state;
    Opts o;
    char *none[] = { "prog", NULL };
    parse(&o, 1, none);
    assert_int_equal(o.layers, 2);
    assert_int_equal(o.steps, 10);
    assert_true(o.lr == 0.1);
    assert_false(o.fast);
    assert_int_equal(o.kind, 0);
    assert_null(o.name);
    assert_false(o.given[F_LAYERS - F_LAYERS]);
    char *args[] = { "prog", "--layers", "5", "--fast", "--kind", "fancy", "--name", "x", NULL };
    parse(&o, 8, args);
    assert_int_equal(o.layers, 5);
    assert_true(o.fast);
    assert_int_equal(o.kind, 1);
    assert_string_equal(o.name, "x");
    assert_true(o.given[F_LAYERS - F_LAYERS]);
    assert_true(o.given[F_FAST - F_LAYERS]);
    assert_false(o.given[F_STEPS - F_LAYERS]);
}

/* The pairs of m as "key=value;key=value;". */
static const char *pairs(const SettingsMeta *m)
{
    static char text[512];
    text[0] = '\0';
    for (int i = 0; i < m->n; i++) {
        size_t n = strlen(text);
        snprintf(text + n, sizeof text - n, "%s=%s;", m->keys[i], m->values[i]);
    }
    return text;
}

/* Only the keys the program writes (not a library's), and only those that apply, after the
 * program's own. */
static void test_write(void **state)
{
    (void)state;
    Opts o;
    char *args[] = { "prog", "--lr", "0.25", NULL };
    parse(&o, 3, args);
    static SettingsMeta m;
    settings_write(TABLE, N_TABLE, &o, &m);
    assert_string_equal(pairs(&m), "m.layers=2;m.kind=plain;");
    o.kind = 1;
    m.n = 0;
    settings_meta_put(&m, "own.key", "x");
    settings_write(TABLE, N_TABLE, &o, &m);
    assert_string_equal(pairs(&m), "own.key=x;m.layers=2;t.lr=0.25;m.kind=fancy;");
}

/* A saved value becomes the run's; a flag that agrees is fine (compared as the snapshot
 * writes it); an onward flag may go past the saved value. */
static void test_merge(void **state)
{
    (void)state;
    Opts o;
    char *args[] = { "prog", "--lr", "0.25", "--steps", "40", NULL };
    parse(&o, 5, args);
    const Setting *layers = settings_find(TABLE, N_TABLE, F_LAYERS);
    const Setting *lr = settings_find(TABLE, N_TABLE, F_LR);
    const Setting *steps = settings_find(TABLE, N_TABLE, F_STEPS);
    const Setting *kind = settings_find(TABLE, N_TABLE, F_KIND);
    settings_merge(layers, &o, false, "7", "file");
    assert_int_equal(o.layers, 7);
    settings_merge(lr, &o, true, "0.25", "file");
    assert_true(o.lr == 0.25);
    settings_merge(steps, &o, true, "30", "file");
    assert_int_equal(o.steps, 40);
    settings_merge(kind, &o, false, "fancy", "file");
    assert_int_equal(o.kind, 1);
    assert_string_equal(settings_key(steps), "t.step");
    char buf[64];
    settings_format(lr, &o, buf, sizeof buf);
    assert_string_equal(buf, "0.25");
}

/* A custom setting without an argument name takes no value (number_formats' actions): the
 * next word is the next flag, and set() sees NULL. */
typedef struct {
    int         calls;
    const char *seen;
    int         layers;
} Actions;

static void act(void *opts, int id, const char *flag, const char *text)
{
    Actions *a = opts;
    assert_int_equal(id, F_FAST);
    assert_string_equal(flag, "--act");
    a->calls++;
    a->seen = text;
}

static void test_custom_without_value(void **state)
{
    (void)state;
    static const Setting t[] = {
        { .name = "act", .id = F_FAST, .type = SETTING_CUSTOM, .set = act, .help = "an action" },
        { .name = "layers", .id = F_LAYERS, .type = SETTING_INT,
          .offset = offsetof(Actions, layers), .lo = 1, .hi = 8, .arg = "N", .help = "blocks" },
    };
    Actions a = { 0, "unset", 0 };
    char *args[] = { "prog", "--act", "--layers", "3", NULL };
    optind = 0;
    settings_parse(t, 2, &a, NULL, F_LAYERS, no_usage, 4, args);
    assert_int_equal(a.calls, 1);
    assert_null(a.seen);
    assert_int_equal(a.layers, 3);
}

/* A folder (--out DIR): its default and a flag set the field, a snapshot's key is read back
 * into it, and it is written as given. An empty name is refused (exit 2), which
 * test_settings_cli checks through the programs (lr_scaling --out ''). */
typedef struct {
    const char *out;
} Folders;

static void test_folder(void **state)
{
    (void)state;
    static const Setting t[] = {
        { .name = "out", .id = F_NAME, .type = SETTING_FOLDER, .offset = offsetof(Folders, out),
          .def = "runs", .arg = "DIR", .help = "where the files go", .key = "run.out" },
    };
    Folders f = { NULL };
    settings_defaults(t, 1, &f);
    assert_string_equal(f.out, "runs");
    char *args[] = { "prog", "--out", "/tmp/x y", NULL };
    optind = 0;
    settings_parse(t, 1, &f, NULL, F_LAYERS, no_usage, 3, args);
    assert_string_equal(f.out, "/tmp/x y");
    char buf[64];
    settings_format(&t[0], &f, buf, sizeof buf);
    assert_string_equal(buf, "/tmp/x y");
    settings_merge(&t[0], &f, false, "saved", "a.safetensors");
    assert_string_equal(f.out, "saved");
}

/* A need is checked only for a flag given, only in its phase (early or not), and a row's check
 * sees the value the flag has just set. The refusals (an exit) are train_gpt's. */
static int lr_checks;
static double lr_checked;
static bool record_lr(const void *o, char *why, size_t len)
{
    (void)why;
    (void)len;
    lr_checks++;
    lr_checked = ((const Opts *)o)->lr;
    return true;
}

static void test_needs_and_check(void **state)
{
    (void)state;
    static const SettingNeed FANCY = { .holds = is_fancy,
                                       .refusal = "--%s applies to --kind fancy, not %s",
                                       .value_id = F_KIND };
    static const Setting t[] = {
        { .name = "lr", .id = F_LR, .type = SETTING_DOUBLE, .offset = offsetof(Opts, lr),
          .lo = 0, .hi = 1, .def = "0.1", .arg = "X", .needs = { &FANCY }, .check = record_lr },
        { .name = "kind", .id = F_KIND, .type = SETTING_CHOICE, .offset = offsetof(Opts, kind),
          .choices = KINDS, .def = "plain", .arg = "K" },
    };
    Opts o;
    memset(&o, 0, sizeof o);
    settings_defaults(t, 2, &o);
    assert_int_equal(lr_checks, 0);     /* a default is not checked */
    char *fancy[] = { "prog", "--kind", "fancy", "--lr", "0.5", NULL };
    optind = 0;
    settings_parse(t, 2, &o, o.given, F_LAYERS, no_usage, 5, fancy);
    assert_int_equal(lr_checks, 1);
    assert_true(lr_checked == 0.5);
    settings_check_needs(t, 2, &o, o.given, F_LAYERS, false);     /* holds: no exit */
    memset(&o, 0, sizeof o);
    settings_defaults(t, 2, &o);
    char *plain[] = { "prog", "--lr", "0.25", NULL };
    optind = 0;
    settings_parse(t, 2, &o, o.given, F_LAYERS, no_usage, 3, plain);
    assert_int_equal(lr_checks, 2);
    assert_true(lr_checked == 0.25);
    settings_check_needs(t, 2, &o, o.given, F_LAYERS, true);      /* not an early need */
    o.given[F_LR - F_LAYERS] = false;
    settings_check_needs(t, 2, &o, o.given, F_LAYERS, false);     /* not given */
}

/* settings_merge_all: every kept row from the file in table order; a key the file lacks is the
 * row's .before, a custom row's saved value is its format of theirs, and a free row or one that
 * does not apply is left as it is. */
typedef struct {
    int    layers;
    long   steps;
    float  alpha;
    int    seed;
    double lr;
    int    mode;
    bool   given[6];
} Run;

enum { R_LAYERS = 400, R_STEPS, R_ALPHA, R_SEED, R_LR, R_MODE };

static const char *file_value(const void *source, const char *key)
{
    for (const char *const *kv = source; *kv; kv += 2)
        if (strcmp(kv[0], key) == 0)
            return kv[1];
    return NULL;
}

static bool never(const void *o)
{
    (void)o;
    return false;
}

static void set_mode(void *opts, int id, const char *flag, const char *text)
{
    (void)id;
    (void)flag;
    ((Run *)opts)->mode = text[0] - '0';
}

static void format_mode(const void *opts, int id, char *buf, size_t len)
{
    (void)id;
    snprintf(buf, len, "%d", ((const Run *)opts)->mode);
}

static void test_merge_all(void **state)
{
    (void)state;
    static const Setting t[] = {
        { .name = "layers", .id = R_LAYERS, .type = SETTING_INT, .offset = offsetof(Run, layers),
          .lo = 1, .hi = 8, .key = "m.layers" },
        { .name = "steps", .id = R_STEPS, .type = SETTING_LONG, .offset = offsetof(Run, steps),
          .lo = 0, .hi = 1000, .key = "t.step", .merge = SETTING_ONWARD },
        { .name = "alpha", .id = R_ALPHA, .type = SETTING_FLOAT, .offset = offsetof(Run, alpha),
          .lo = 0, .hi = 100, .key = "m.alpha", .before = "0.1" },
        { .name = "seed", .id = R_SEED, .type = SETTING_INT, .offset = offsetof(Run, seed),
          .lo = 0, .hi = 99, .key = "t.seed", .merge = SETTING_FREE },
        { .name = "lr", .id = R_LR, .type = SETTING_DOUBLE, .offset = offsetof(Run, lr),
          .lo = 0, .hi = 1, .key = "t.lr", .applies = never },
        { .name = "mode", .id = R_MODE, .type = SETTING_CUSTOM, .set = set_mode,
          .format = format_mode, .arg = "M", .key = "t.mode", .library_key = true },
    };
    const char *file[] = { "m.layers", "7", "t.step", "30", "t.seed", "9", "t.lr", "0.5", NULL };
    Run r = { .layers = 2, .steps = 40, .alpha = 3.0f, .seed = 1, .lr = 0.25, .mode = 1 };
    r.given[R_STEPS - R_LAYERS] = true;
    Run theirs = r;
    theirs.mode = 5;        /* as a library read the snapshot's config */
    SettingsSaved saved = { .path = "file", .maker = "test", .value = file_value,
                            .source = file, .theirs = &theirs };
    settings_merge_all(t, 6, &r, r.given, R_LAYERS, &saved);
    assert_int_equal(r.layers, 7);
    assert_int_equal(r.steps, 40);          /* given, past the saved 30 */
    assert_true(r.alpha == 0.1f);           /* the file lacks m.alpha: .before */
    assert_int_equal(r.seed, 1);
    assert_true(r.lr == 0.25);
    assert_int_equal(r.mode, 5);
    assert_string_equal(settings_saved_value(&saved, "t.seed", NULL), "9");
    assert_string_equal(settings_saved_value(&saved, "m.none", "x"), "x");
    char buf[32];
    settings_format(&t[2], &r, buf, sizeof buf);
    assert_string_equal(buf, "0.100000001");     /* a float, to the digits that read it back */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_flags),
        cmocka_unit_test(test_write),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_custom_without_value),
        cmocka_unit_test(test_folder),
        cmocka_unit_test(test_needs_and_check),
        cmocka_unit_test(test_merge_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
