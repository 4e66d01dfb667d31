/* Every program's flags against the library's schemas (autograd/schema.h; docs/settings.md):
 * each program prints its settings table with --settings-table (a TSV: flag, key, schema,
 * range, default, who writes the key, merge rule). A flag that names a schema must find its row
 * there with the same range and the same writer; a key the library writes must be a kept
 * schema row; a library key must not be written by the program; a flag of a run-only schema
 * row (RunLocal's) has no key, no writer and no merge rule, and its range is its row's (the
 * row of the flag's name, '-' as '_'); every flag must be in --help.
 * Runs the built programs (TAPEGRAD_BUILD_DIR), without leak detection under SANITIZE=1, as the
 * other tests that start MPI programs do: OpenMPI keeps memory until exit. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "autograd/schema.h"
#include "data/dataset.h"
#include "nn/gpt.h"
#include "nn/gpt_lora.h"
#include "optim/schedule.h"
#include "optim/snapshot_keys.h"
#include "optim/train.h"
#include "run/run.h"

#ifndef TAPEGRAD_BUILD_DIR
#define TAPEGRAD_BUILD_DIR "build"
#endif

/* The programs whose flags come from a settings table (cli/settings.h). */
static const char *const PROGRAMS[] = {
    "attention_memory", "backprop_strategies", "data_parallel", "fit_largest", "lora_finetune",
    "loss_scaling", "lr_scaling", "memory_calculator", "memory_savers", "number_formats",
    "scaling_laws", "tape_tour", "train_gpt", "train_mlp",
};

/* Every library schema whose rows a snapshot keeps, with the prefix a file gives its keys. */
static const struct {
    const Schema *sc;
    const char   *prefix;
} LIBRARY[] = {
    { &GPT_SCHEMA, "model." }, { &LORA_SCHEMA, "lora." }, { &TRAINER_SCHEMA, "" },
    { &TRAINER_COUNTER_SCHEMA, "" }, { &SCHED_SCHEMA, "" }, { &DATA_SCHEMA, "data." },
    { &RUN_KEPT_SCHEMA, "" }, { &RUN_RECORD_SCHEMA, "" },
};
/* The schemas with run-only rows, which a flag names without a snapshot key: RunLocal's and
 * RunParallel's every row, TrainerConfig's checkpointing and offload. */
static const Schema *const RUN_ONLY[] = { &RUN_LOCAL_SCHEMA, &RUN_PARALLEL_SCHEMA,
                                          &TRAINER_SCHEMA };

/* The row of a file's key in schema sc (or in any, sc NULL), and that schema in *in. */
static const SchemaRow *library_row(const char *key, const char *schema, const Schema **in)
{
    for (size_t k = 0; k < sizeof LIBRARY / sizeof LIBRARY[0]; k++) {
        size_t n = strlen(LIBRARY[k].prefix);
        if ((schema && strcmp(schema, LIBRARY[k].sc->name) != 0) ||
            strncmp(key, LIBRARY[k].prefix, n) != 0)
            continue;
        const SchemaRow *r = schema_find(LIBRARY[k].sc, key + n);
        if (r) {
            *in = LIBRARY[k].sc;
            return r;
        }
    }
    return NULL;
}

/* Whether the library writes key: a kept row of a schema no program writes (train.step, which
 * RunKept's row also names, is the trainer's counter). */
static bool library_writes(const char *key)
{
    for (size_t k = 0; k < sizeof LIBRARY / sizeof LIBRARY[0]; k++) {
        size_t n = strlen(LIBRARY[k].prefix);
        const SchemaRow *r = !LIBRARY[k].sc->by_program && strncmp(key, LIBRARY[k].prefix, n) == 0
                                 ? schema_find(LIBRARY[k].sc, key + n) : NULL;
        if (r && r->kept)
            return true;
    }
    return false;
}

/* A flag of a run-only schema: no key, writer or merge rule; a number's range is that of the
 * schema's row named as the flag ('-' as '_'). */
static void check_run_only(const char *program, const char *flag, char *const *f)
{
    const Schema *sc = NULL;
    for (size_t k = 0; k < sizeof RUN_ONLY / sizeof RUN_ONLY[0]; k++)
        if (strcmp(f[2], RUN_ONLY[k]->name) == 0)
            sc = RUN_ONLY[k];
    if (!sc || strcmp(f[6], "-") != 0 || strcmp(f[7], "-") != 0) {
        print_error("%s %s: no key, but schema %s, written %s, merge %s\n", program, flag, f[2],
                    f[6], f[7]);
        fail();
    }
    if (strcmp(f[3], "-") == 0)
        return;
    char name[96], lo[64], hi[64];
    snprintf(name, sizeof name, "%s", f[0]);
    for (char *c = name; *c; c++)
        *c = *c == '-' ? '_' : *c;
    const SchemaRow *r = schema_find(sc, name);
    if (!r || r->kept) {
        print_error("%s %s: %s has no run-only row '%s'\n", program, flag, sc->name, name);
        fail();
    }
    snprintf(lo, sizeof lo, "%.17g", r->lo);
    snprintf(hi, sizeof hi, "%.17g", r->hi);
    if (strcmp(f[3], lo) != 0 || strcmp(f[4], hi) != 0) {
        print_error("%s %s: range [%s, %s], its schema row's [%s, %s]\n", program, flag, f[3],
                    f[4], lo, hi);
        fail();
    }
}

/* The text up to the next sep (which is cut off), and *p moved past it; NULL at the end. */
static char *next_field(char **p, char sep)
{
    char *start = *p;
    if (!start)
        return NULL;
    char *end = strchr(start, sep);
    if (end)
        *end = '\0';
    *p = end ? end + 1 : NULL;
    return start;
}

/* One line of --settings-table: flag, key, schema, lo, hi, default, written, merge. */
static void check_flag(const char *program, char *line, const char *help, int *from_schema)
{
    char *f[8];
    for (int i = 0; i < 8; i++) {
        f[i] = next_field(&line, '\t');
        assert_non_null(f[i]);
    }
    char flag[96];
    snprintf(flag, sizeof flag, "--%s", f[0]);
    if (!strstr(help, flag)) {
        print_error("%s: %s is in its table, not in its --help\n", program, flag);
        fail();
    }
    const Schema *in = NULL;
    bool has_schema = strcmp(f[2], "-") != 0, library = strcmp(f[6], "library") == 0;
    if (has_schema && strcmp(f[1], "-") == 0) {
        check_run_only(program, flag, f);
        (*from_schema)++;
        return;
    }
    const SchemaRow *r = strcmp(f[1], "-") == 0 ? NULL
                                                : library_row(f[1], has_schema ? f[2] : NULL, &in);
    if (has_schema) {
        /* a library setting: its row exists, gives the range, and says who writes the key */
        char lo[64], hi[64];
        if (!r) {
            print_error("%s %s: %s has no row '%s'\n", program, flag, f[2], f[1]);
            fail();
        }
        snprintf(lo, sizeof lo, "%.17g", r->lo);
        snprintf(hi, sizeof hi, "%.17g", r->hi);
        if (strcmp(f[3], "-") != 0 && (strcmp(f[3], lo) != 0 || strcmp(f[4], hi) != 0)) {
            print_error("%s %s: range [%s, %s], its schema row's [%s, %s]\n", program, flag,
                        f[3], f[4], lo, hi);
            fail();
        }
        assert_int_equal(library, !in->by_program || library_writes(f[1]));
        (*from_schema)++;
    } else if (library && (!r || !r->kept)) {
        /* a key the library writes without a schema reference: still a kept schema row */
        print_error("%s %s: the library writes no key '%s'\n", program, flag, f[1]);
        fail();
    } else if (!library && r && !in->by_program) {
        print_error("%s %s: '%s' is a library key, written by the program\n", program, flag,
                    f[1]);
        fail();
    }
}

static void test_program_flags_are_the_schemas(void **state)
{
    (void)state;
    enum { OUT = 1 << 16 };
    char *table = malloc(OUT), *help = malloc(OUT), cmd[512];
    assert_non_null(table);
    assert_non_null(help);
    int from_schema = 0, train_gpt = 0;
    for (size_t p = 0; p < sizeof PROGRAMS / sizeof PROGRAMS[0]; p++) {
        snprintf(cmd, sizeof cmd, "cd %s && ASAN_OPTIONS=detect_leaks=0 timeout -s KILL 60 bin/%s --settings-table 2>&1",
                 TAPEGRAD_BUILD_DIR, PROGRAMS[p]);
        assert_int_equal(test_run_shell(cmd, table, OUT), 0);
        snprintf(cmd, sizeof cmd, "cd %s && ASAN_OPTIONS=detect_leaks=0 timeout -s KILL 60 bin/%s --help 2>&1",
                 TAPEGRAD_BUILD_DIR, PROGRAMS[p]);
        assert_int_equal(test_run_shell(cmd, help, OUT), 0);
        if (strncmp(table, "flag\tkey\t", 9) != 0) {
            print_error("%s --settings-table printed:\n%.300s\n", PROGRAMS[p], table);
            fail();
        }
        char *rest = strchr(table, '\n') + 1, *line;
        int before = from_schema;
        while ((line = next_field(&rest, '\n')) && *line)
            check_flag(PROGRAMS[p], line, help, &from_schema);
        if (strcmp(PROGRAMS[p], "train_gpt") == 0)
            train_gpt = from_schema - before;
    }
    /* train_gpt's flags are schema rows but --kernels (the process's), --fp8-scaling and
     * --loss-scale (parts of a library key's text), --lora and --lora-targets (LoRA's, merged
     * whole from a snapshot): the model's, seed, clip, the optimizers', precision, loss scaling,
     * the schedule's, the data's, the run's kept and run-only settings */
    assert_true(train_gpt >= 58);
    free(table);
    free(help);
}

/* A train_gpt flag of a schema row with names takes them from the row (examples/common/
 * settings.c), not from a list of the program's: an unknown value is refused with exactly the
 * row's names, in the row's order. */
static void test_train_gpt_names_are_the_schemas(void **state)
{
    (void)state;
    static const struct {
        const char   *flag;
        const Schema *sc;
        const char   *key;
    } NAMED[] = {
        { "attention", &RUN_KEPT_SCHEMA, "run.attention" },
        { "grad-wire", &RUN_PARALLEL_SCHEMA, "grad_wire" },
        { "task", &DATA_SCHEMA, "task" },
        { "optimizer", &TRAINER_SCHEMA, "optim.kind" },
        { "offload", &TRAINER_SCHEMA, "run.offload" },
        { "decay", &SCHED_SCHEMA, "schedule.decay" },
        { "adam8bit-rounding", &TRAINER_SCHEMA, "optim.rounding" },
    };
    enum { OUT = 4096 };
    char out[OUT], cmd[512], want[512];
    for (size_t k = 0; k < sizeof NAMED / sizeof NAMED[0]; k++) {
        const SchemaRow *r = schema_find(NAMED[k].sc, NAMED[k].key);
        assert_non_null(r);
        assert_non_null(r->name);
        int used = snprintf(want, sizeof want, "--%s: 'nosuch' is not one of: ", NAMED[k].flag);
        for (int i = 0; r->name(i); i++)
            used += snprintf(want + used, sizeof want - (size_t)used, "%s%s", i ? ", " : "",
                             r->name(i));
        snprintf(cmd, sizeof cmd, "cd %s && ASAN_OPTIONS=detect_leaks=0 timeout -s KILL 60 "
                 "bin/train_gpt --%s nosuch 2>&1", TAPEGRAD_BUILD_DIR, NAMED[k].flag);
        assert_int_equal(test_run_shell(cmd, out, OUT), 2);
        /* the whole list: the line ends where the names do */
        char *at = strstr(out, want);
        if (!at || at[strlen(want)] != '\n') {
            print_error("train_gpt --%s nosuch printed:\n%s\nexpected a line \"%s\"\n",
                        NAMED[k].flag, out, want);
            fail();
        }
    }
}

/* The metadata of a safetensors file (its JSON header's __metadata__), parsed. */
static cJSON *file_metadata(const char *path, cJSON **header)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char len8[8];
    assert_int_equal(fread(len8, 1, 8, f), 8);
    size_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | len8[i];
    char *json = malloc(n + 1);
    assert_non_null(json);
    assert_int_equal(fread(json, 1, n, f), n);
    json[n] = '\0';
    fclose(f);
    *header = cJSON_Parse(json);
    free(json);
    assert_non_null(*header);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(*header, "__metadata__");
    assert_non_null(meta);
    return meta;
}

/* Every key of the file is a kept row of a schema (LIBRARY: the library's and the run's, its
 * record's among them) or one of the words beside them (the format tag, the data RNG's state);
 * each of want must be there. */
static void check_file_keys(const char *path, const char *const *want)
{
    cJSON *header, *meta = file_metadata(path, &header), *item;
    int keys = 0;
    cJSON_ArrayForEach(item, meta) {
        const char *key = item->string;
        const Schema *in;
        keys++;
        if (strcmp(key, "format") == 0 || strncmp(key, "train.data_rng.", 15) == 0)
            continue;
        const SchemaRow *r = library_row(key, NULL, &in);
        if (!r || !r->kept) {
            print_error("%s: '%s' is no kept row of a schema\n", path, key);
            fail();
        }
    }
    for (int i = 0; want[i]; i++)
        if (!cJSON_GetObjectItemCaseSensitive(meta, want[i])) {
            print_error("%s lacks '%s'\n", path, want[i]);
            fail();
        }
    print_message("%s: %d keys, each a schema's\n", path, keys);
    assert_true(keys > 40);
    cJSON_Delete(header);
}

/* The keys train_gpt writes come from schemas, none by hand: a task run's, and a text LoRA
 * run's on a base of longer rows (run.seq, and the record's run.ranks, lora.base and its hash). */
static void test_train_gpt_keys_are_schema_rows(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_schema_cli.XXXXXX", cmd[4096], out[1 << 14];
    assert_non_null(mkdtemp(dir));
    const char *small = "--layers 1 --embd 16 --heads 2 --steps 2 --eval-every 0 "
                        "--eval-examples 16 --separate-qkv";
    const char *text = "--data " TAPEGRAD_SOURCE_DIR "/data/tinyshakespeare.txt";
    snprintf(cmd, sizeof cmd, "cd %s && B=$(cd %s && pwd)/bin/train_gpt && "
             "$B %s --save task.st && $B %s %s --seq 32 --save base.st && "
             "$B %s --seq 16 --load-base base.st --lora 2 --steps 2 --eval-every 0 "
             "--eval-examples 16 --save lora.st 2>&1", dir, TAPEGRAD_BUILD_DIR, small, small,
             text, text);
    if (test_run_shell(cmd, out, sizeof out) != 0) {
        print_error("%s\n%s\n", cmd, out);
        fail();
    }
    char path[256];
    snprintf(path, sizeof path, "%s/task.st", dir);
    check_file_keys(path, (const char *const[]){ "data.kind", "data.task", "run.ranks",
                                                  "schedule.batch", NULL });
    snprintf(path, sizeof path, "%s/lora.st", dir);
    check_file_keys(path, (const char *const[]){ "data.path", "run.seq", "run.ranks",
                                                  "lora.base", "lora.base_fnv1a", NULL });
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_program_flags_are_the_schemas),
        cmocka_unit_test(test_train_gpt_names_are_the_schemas),
        cmocka_unit_test(test_train_gpt_keys_are_schema_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
