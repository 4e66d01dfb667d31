/* Replays the fuzzers' corpora with the normal compiler (`make fuzz` runs the fuzzers; this is
 * what `make test` keeps of them): every file of tests/fuzz/corpus/NAME and
 * tests/fuzz/crashes/NAME through the harness NAME, the same function libFuzzer calls. A crash,
 * an abort or (under SANITIZE=1) undefined behaviour fails the suite; so does a harness whose
 * corpus has lost its valid inputs or its invalid ones (then it tests nothing). The crash
 * folders keep every input that ever broke a harness, fixed since. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/fuzz/fuzz_snapshot.c"
#include "tests/fuzz/fuzz_train_load.c"
#include "tests/fuzz/fuzz_lora_adapter.c"
#include "tests/fuzz/fuzz_settings_agree.c"

typedef int (*Harness)(const uint8_t *data, size_t size);

/* fuzz_snapshot_one says whether the file opened: 0 for an accepted input, as the others. */
static int snapshot_status(const uint8_t *data, size_t size)
{
    return !fuzz_snapshot_one(data, size);
}

typedef struct {
    int files, accepted, refused, other;    /* other: a train_load status not 0, 1 or 2 */
} Replay;

static uint8_t *slurp(const char *path, size_t *size)
{
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = n > 0 ? (size_t)n : 0;
    return buf;
}

/* Every regular file of TAPEGRAD_SOURCE_DIR/tests/fuzz/KIND/NAME through the harness. */
static void replay_dir(const char *kind, const char *name, Harness harness, Replay *r)
{
    char dir[1024], path[1400];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/%s/%s", TAPEGRAD_SOURCE_DIR, kind, name);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t size;
        uint8_t *data = slurp(path, &size);
        assert_non_null(data);
        r->files++;
        int status = harness(data, size);
        if (status == 0)
            r->accepted++;
        else if (status == 1 || status == 2)  /* a bad file; a flag against the file */
            r->refused++;
        else
            r->other++;
        free(data);
    }
    closedir(d);
}

static void check(const char *name, Harness harness)
{
    Replay r = { 0 };
    /* Each refused input prints its one message; hundreds of them would bury the report. A
     * crash's report goes there too: TAPEGRAD_FUZZ_VERBOSE=1 keeps stderr to see it. */
    fflush(stderr);
    bool quiet = !getenv("TAPEGRAD_FUZZ_VERBOSE");
    int saved = quiet ? dup(2) : -1, null = quiet ? open("/dev/null", O_WRONLY) : -1;
    if (saved >= 0 && null >= 0)
        dup2(null, 2);
    replay_dir("corpus", name, harness, &r);
    replay_dir("crashes", name, harness, &r);
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    if (null >= 0)
        close(null);
    printf("%s: %d inputs, %d accepted, %d refused\n", name, r.files, r.accepted, r.refused);
    assert_true(r.accepted > 0);
    assert_true(r.refused > 0);
    assert_int_equal(r.other, 0);
}

static void test_snapshot_reader_corpus(void **s)
{
    (void)s;
    check("snapshot", snapshot_status);
}

static void test_train_load_corpus(void **s)
{
    (void)s;
    check("train_load", fuzz_train_load_one);
}

/* Issue 30's harnesses: LoRA adapter files, and two ranks' command lines compared. */
static void test_lora_adapter_corpus(void **s)
{
    (void)s;
    check("lora_adapter", fuzz_lora_adapter_one);
}

static void test_settings_agree_corpus(void **s)
{
    (void)s;
    check("settings_agree", fuzz_settings_agree_one);
}

int main(void)
{
    /* Under make test the work folder is the checkout; the snapshots' data paths are relative
     * to it (data/tinyshakespeare.txt). */
    if (chdir(TAPEGRAD_SOURCE_DIR) != 0)
        return 1;
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_snapshot_reader_corpus),
        cmocka_unit_test(test_train_load_corpus),
        cmocka_unit_test(test_lora_adapter_corpus),
        cmocka_unit_test(test_settings_agree_corpus),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
