/* Snapshots: bit-exact round trips, the bytes on disk against the safetensors layout, atomic
 * writes that fail without touching the previous file, loading into a model with exact shape
 * and name checks, and trainer state (RNG, step) in metadata. Broken files are in
 * test_snapshot_corrupt.c.
 *
 * With SNAPSHOT_TEST_OUT=FILE set, test_layout_on_disk also copies its file to FILE and prints
 * the lines tests/reference/read_snapshot.py should print for it (numpy's view of the file). */
#include "tests/snapshot_test_helpers.h"

#include <errno.h>
#include <inttypes.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "tests/outfile_check.h"

static bool file_is(const char *path, const unsigned char *bytes, size_t len)
{
    size_t n;
    unsigned char *now = slurp(path, &n);
    bool same = n == len && memcmp(now, bytes, len) == 0;
    free(now);
    return same;
}

static bool no_temp_file(const char *path)
{
    return outfile_no_temp_beside(path);
}

/* Round trip --------------------------------------------------------------------------------- */

typedef struct {
    const char   *name;
    SnapshotDtype dtype;
    int           ndim;
    int64_t       shape[2];
    const void   *data;
    size_t        bytes;
} Item;

typedef struct {
    float    wte[12], specials[6], scalar;
    uint16_t bf16[4], f16[4];
    uint8_t  codes[7];
    int32_t  counts[4];
    int64_t  table[4];
} TestData;

static float float_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The first N_REFERENCE tensors hold values whose sums are exact in float64 (the numpy check
 * compares them digit for digit) and the integer extremes; the rest are awkward on purpose: a NaN
 * with a payload, -0, infinities, a subnormal, an empty tensor between two others, a scalar.
 * codes has an odd byte count, which leaves the tensors after it unaligned. */
enum { N_REFERENCE = 6, N_ITEMS = 9 };

static void test_items(TestData *d, Item *items)
{
    for (int i = 0; i < 12; i++)
        d->wte[i] = (float)(i - 5) * 0.25f;                      /* sum 1.5 */
    const uint16_t bf16[4] = { 0x3f80, 0xc000, 0x3f00, 0x4040 }; /* 1 -2 0.5 3: sum 2.5 */
    const uint16_t f16[4] = { 0x3c00, 0xb800, 0x4000, 0x3400 };  /* 1 -0.5 2 0.25: sum 2.75 */
    const uint8_t codes[7] = { 0, 1, 15, 16, 127, 128, 255 };    /* sum 542 */
    const int32_t counts[4] = { INT32_MIN, -1, 0, INT32_MAX };   /* sum -2 */
    const int64_t table[4] = { INT64_MIN, -1, INT64_MAX, (int64_t)1 << 40 };
    const float specials[6] = { float_bits(0x7fc12345u), -0.0f, INFINITY, -INFINITY,
                                float_bits(0x00000001u), 3.4028235e38f };
    memcpy(d->bf16, bf16, sizeof bf16);
    memcpy(d->f16, f16, sizeof f16);
    memcpy(d->codes, codes, sizeof codes);
    memcpy(d->counts, counts, sizeof counts);
    memcpy(d->table, table, sizeof table);
    memcpy(d->specials, specials, sizeof specials);
    d->scalar = 3.5f;
    const Item list[N_ITEMS] = {
        { "wte", SNAPSHOT_F32, 2, { 4, 3 }, d->wte, sizeof d->wte },
        { "ln.gamma", SNAPSHOT_BF16, 1, { 4 }, d->bf16, sizeof d->bf16 },
        { "h", SNAPSHOT_F16, 2, { 2, 2 }, d->f16, sizeof d->f16 },
        { "codes", SNAPSHOT_U8, 1, { 7 }, d->codes, sizeof d->codes },
        { "counts", SNAPSHOT_I32, 2, { 2, 2 }, d->counts, sizeof d->counts },
        { "rng.table", SNAPSHOT_I64, 1, { 4 }, d->table, sizeof d->table },
        { "specials", SNAPSHOT_F32, 1, { 6 }, d->specials, sizeof d->specials },
        { "empty", SNAPSHOT_F32, 2, { 0, 3 }, NULL, 0 },
        { "scale", SNAPSHOT_F32, 0, { 0 }, &d->scalar, sizeof d->scalar },
    };
    memcpy(items, list, sizeof list);
}

static void add_items(SnapshotWriter *w, const Item *items, int n)
{
    SnapshotError err;
    for (int i = 0; i < n; i++)
        assert_true(snapshot_add(w, items[i].name, items[i].dtype, items[i].ndim, items[i].shape,
                                 items[i].data, &err));
}

static const char NOTE[] = "quote \" backslash \\ newline \n tab \t unicode \xcf\x80 \xe2\x89\x88 3.14";

static void test_round_trip(void **state)
{
    (void)state;
    char path[512];
    in_dir(path, sizeof path, "round_trip.safetensors");
    TestData d;
    Item items[N_ITEMS];
    int n = N_ITEMS;
    test_items(&d, items);
    const double reals[4] = { 0.1, 5e-324, -0.0, 65536.0 };
    SnapshotError err;
    SnapshotWriter *w = snapshot_writer_new();
    add_items(w, items, n);
    assert_true(snapshot_add_meta_u64(w, "step", UINT64_MAX, &err));
    assert_true(snapshot_add_meta(w, "note", NOTE, &err));
    for (int i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof key, "real%d", i);
        assert_true(snapshot_add_meta_f64(w, key, reals[i], &err));
    }
    assert_true(snapshot_write(w, path, &err));
    snapshot_writer_free(w);

    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    assert_int_equal(snapshot_count(r), n);
    for (int i = 0; i < n; i++) {
        const SnapshotEntry *e = snapshot_entry(r, i);   /* file order is the order of adding */
        assert_string_equal(e->name, items[i].name);
        assert_ptr_equal(snapshot_find(r, items[i].name), e);
        assert_int_equal(e->dtype, items[i].dtype);
        assert_int_equal(e->ndim, items[i].ndim);
        for (int k = 0; k < e->ndim; k++)
            assert_int_equal(e->shape[k], items[i].shape[k]);
        assert_int_equal(e->end - e->begin, items[i].bytes);
        unsigned char *back = malloc(items[i].bytes + 1);
        assert_true(snapshot_read(r, e->name, e->dtype, e->ndim, e->shape, back, &err));
        if (items[i].bytes)
            assert_memory_equal(back, items[i].data, items[i].bytes);
        free(back);
    }
    assert_null(snapshot_find(r, "wpe"));
    assert_null(snapshot_entry(r, n));
    uint64_t step = 0;
    assert_true(snapshot_meta_u64(r, "step", &step, &err));
    assert_true(step == UINT64_MAX);
    assert_string_equal(snapshot_meta(r, "note"), NOTE);
    assert_int_equal(snapshot_meta_count(r), 6);
    assert_string_equal(snapshot_meta_key(r, 0), "step");
    assert_string_equal(snapshot_meta_key(r, 5), "real3");
    for (int i = 0; i < 4; i++) {
        char key[16];
        double v = 1.0;
        snprintf(key, sizeof key, "real%d", i);
        assert_true(snapshot_meta_f64(r, key, &v, &err));
        assert_memory_equal(&v, &reals[i], sizeof v);   /* bit-exact, sign of -0 included */
    }
    snapshot_close(r);
}

static void test_tensor_round_trip(void **state)
{
    (void)state;
    char path[512];
    in_dir(path, sizeof path, "tensors.safetensors");
    Rng rng = rng_new(3, 1);
    Tensor *a = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 4 });
    Tensor *b = test_leaf(&rng, 1.0f, 1, (int[]){ 5 });
    tensor_set_name(a, "blocks.0.attn.qkv.weight");
    SnapshotError err;
    SnapshotWriter *w = snapshot_writer_new();
    assert_true(snapshot_add_tensor(w, NULL, a, &err));
    assert_true(snapshot_add_tensor(w, "adam.m.bias", b, &err));
    assert_true(snapshot_write(w, path, &err));
    snapshot_writer_free(w);

    Tensor *a2 = tensor_new3(MEM_TEMP, 2, 3, 4), *b2 = tensor_new1(MEM_TEMP, 5);
    tensor_set_name(a2, "blocks.0.attn.qkv.weight");
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    const char *names[] = { "adam.m.bias", "blocks.0.attn.qkv.weight" };
    assert_true(snapshot_check_names(r, names, 2, &err));
    assert_true(snapshot_read_tensor(r, NULL, a2, &err));
    assert_true(snapshot_read_tensor(r, "adam.m.bias", b2, &err));
    assert_memory_equal(a2->data, a->data, a->size * sizeof(float));
    assert_memory_equal(b2->data, b->data, b->size * sizeof(float));
    snapshot_close(r);
    tensor_free(a);
    tensor_free(b);
    tensor_free(a2);
    tensor_free(b2);
}

/* The bytes on disk, read without the library -------------------------------------------------- */

static const cJSON *json_field(const cJSON *obj, const char *key)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, key);
    assert_non_null(f);
    return f;
}

/* What read_snapshot.py prints for this file, when asked to produce it. */
static void print_reference(const char *path, const unsigned char *file, size_t len)
{
    const char *out = getenv("SNAPSHOT_TEST_OUT");
    if (!out)
        return;
    spit(out, file, len);
    printf("wte F32 [4, 3] 1.5\nln.gamma BF16 [4] 2.5\nh F16 [2, 2] 2.75\ncodes U8 [7] 542\n"
           "counts I32 [2, 2] -2\nrng.table I64 [4] 1099511627774\nmeta step 1200\n"
           "meta note %s\n", path);
}

static void test_layout_on_disk(void **state)
{
    (void)state;
    char path[512];
    in_dir(path, sizeof path, "layout.safetensors");
    TestData d;
    Item items[N_ITEMS];
    int n = N_REFERENCE;
    test_items(&d, items);
    SnapshotError err;
    SnapshotWriter *w = snapshot_writer_new();
    add_items(w, items, n);
    snapshot_add_meta_u64(w, "step", 1200, NULL);
    snapshot_add_meta(w, "note", path, NULL);
    assert_true(snapshot_write(w, path, &err));
    snapshot_writer_free(w);

    size_t len;
    unsigned char *file = slurp(path, &len);
    uint64_t header_len = header_length(file);
    assert_true(header_len > 0 && (8 + header_len) % 8 == 0);
    assert_int_equal(file[8], '{');
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)file + 8, header_len, &end, false);
    assert_non_null(root);
    for (const char *p = end; p < (const char *)file + 8 + header_len; p++)
        assert_int_equal(*p, ' ');   /* only space padding after the JSON object */
    const cJSON *meta = json_field(root, "__metadata__");
    assert_string_equal(json_field(meta, "step")->valuestring, "1200");
    assert_int_equal(cJSON_GetArraySize(root), n + 1);
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *e = json_field(root, items[i].name);
        assert_string_equal(json_field(e, "dtype")->valuestring, snapshot_dtype_name(items[i].dtype));
        const cJSON *shape = json_field(e, "shape"), *offsets = json_field(e, "data_offsets");
        assert_int_equal(cJSON_GetArraySize(shape), items[i].ndim);
        for (int k = 0; k < items[i].ndim; k++)
            assert_int_equal(cJSON_GetArrayItem(shape, k)->valueint, items[i].shape[k]);
        assert_int_equal(cJSON_GetArrayItem(offsets, 0)->valueint, offset);
        assert_int_equal(cJSON_GetArrayItem(offsets, 1)->valueint, offset + items[i].bytes);
        assert_memory_equal(file + 8 + header_len + offset, items[i].data, items[i].bytes);
        offset += items[i].bytes;
    }
    assert_int_equal(len, 8 + header_len + offset);
    cJSON_Delete(root);
    print_reference(path, file, len);
    free(file);
}

/* Atomic writes -------------------------------------------------------------------------------- */

static void test_failed_writes_leave_the_file(void **state)
{
    (void)state;
    char path[512], missing[512], dirpath[512], inside[600];
    in_dir(path, sizeof path, "atomic.safetensors");
    size_t len;
    unsigned char *before = write_small(path, &len);
    static float big[16384];   /* 64 KiB of data */
    SnapshotError err;
    SnapshotWriter *w = snapshot_writer_new();
    assert_true(snapshot_add(w, "big", SNAPSHOT_F32, 1, (int64_t[]){ 16384 }, big, &err));

    /* A directory that does not exist. */
    in_dir(missing, sizeof missing, "no/such/dir/snap.safetensors");
    assert_false(snapshot_write(w, missing, &err));
    expect_message(err.message, missing, "No such file or directory");

    /* The disk "fills up" after 4 KiB: the write fails midway, the old file stays whole. */
    struct rlimit old_limit, limit;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
    limit = old_limit;
    limit.rlim_cur = 4096;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &limit), 0);
    bool ok = snapshot_write(w, path, &err);
    setrlimit(RLIMIT_FSIZE, &old_limit);
    signal(SIGXFSZ, old_handler);
    assert_false(ok);
    expect_message(err.message, path, "File too large");
    assert_true(file_is(path, before, len));
    assert_true(no_temp_file(path));

    /* The rename fails: the target is a directory. */
    in_dir(dirpath, sizeof dirpath, "a_directory");
    assert_int_equal(mkdir(dirpath, 0755), 0);
    snprintf(inside, sizeof inside, "%s/keep", dirpath);
    spit(inside, "x", 1);
    assert_false(snapshot_write(w, dirpath, &err));
    expect_message(err.message, dirpath, "is a folder");
    assert_true(no_temp_file(dirpath));
    assert_true(file_is(inside, (const unsigned char *)"x", 1));

    /* A writer whose add failed refuses to write at all. */
    assert_false(snapshot_add(w, "big", SNAPSHOT_F32, 1, (int64_t[]){ 1 }, big, &err));
    assert_false(snapshot_write(w, path, &err));
    expect_message(err.message, path, "tensor 'big' added twice");
    assert_true(file_is(path, before, len));
    assert_true(no_temp_file(path));
    snapshot_writer_free(w);

    /* And a good write replaces the file. */
    w = snapshot_writer_new();
    assert_true(snapshot_add(w, "big", SNAPSHOT_F32, 1, (int64_t[]){ 16384 }, big, &err));
    assert_true(snapshot_write(w, path, &err));
    snapshot_writer_free(w);
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    assert_int_equal(snapshot_count(r), 1);
    assert_string_equal(snapshot_entry(r, 0)->name, "big");
    snapshot_close(r);
    free(before);
}

static void test_writer_rejects_bad_entries(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int         ndim;
        int64_t     shape[2];
        bool        null_data;
        const char *message;
    } bad[] = {
        { "", 1, { 1 }, false, "needs a non-empty name" },
        { "__metadata__", 1, { 1 }, false, "reserved for metadata" },
        { "ok", 1, { 1 }, false, "tensor 'ok' added twice" },
        { "neg", 2, { 2, -1 }, false, "dimension 1 of size -1" },
        { "deep", 9, { 1 }, false, "9 dimensions" },
        { "nodata", 1, { 3 }, true, "tensor 'nodata' has no data" },
        { "bad\xff", 1, { 1 }, false, "not valid UTF-8" },
    };
    static const float one[9] = { 1 };
    const int64_t deep[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    SnapshotError err;
    SnapshotWriter *w = snapshot_writer_new();
    assert_true(snapshot_add(w, "ok", SNAPSHOT_F32, 1, (int64_t[]){ 1 }, one, &err));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int64_t *shape = bad[i].ndim == 9 ? deep : bad[i].shape;
        assert_false(snapshot_add(w, bad[i].name, SNAPSHOT_F32, bad[i].ndim, shape,
                                  bad[i].null_data ? NULL : one, &err));
        assert_non_null(strstr(err.message, bad[i].message));
    }
    assert_false(snapshot_add_meta(w, "k", "\xc0\xaf", &err));   /* overlong '/' */
    assert_non_null(strstr(err.message, "UTF-8"));
    assert_true(snapshot_add_meta(w, "k", "v", &err));
    assert_false(snapshot_add_meta(w, "k", "w", &err));
    assert_non_null(strstr(err.message, "metadata 'k' added twice"));
    char path[512];
    in_dir(path, sizeof path, "never_written.safetensors");
    assert_false(snapshot_write(w, path, &err));
    expect_message(err.message, path, "a tensor needs a non-empty name");   /* the first error */
    assert_true(access(path, F_OK) != 0 && no_temp_file(path));
    snapshot_writer_free(w);
}

/* Loading into a model ------------------------------------------------------------------------ */

static void test_shape_dtype_and_names(void **state)
{
    (void)state;
    char path[512], want[700];
    in_dir(path, sizeof path, "model.safetensors");
    Rng rng = rng_new(5, 1);
    Tensor *wte = test_leaf(&rng, 1.0f, 2, (int[]){ 65, 128 });
    Tensor *q = test_leaf(&rng, 1.0f, 1, (int[]){ 16 });
    SnapshotError err;
    SnapshotWriter *w = snapshot_writer_new();
    snapshot_add_tensor(w, "wte", wte, NULL);
    snapshot_add_tensor(w, "blocks.9.attn.q.weight", q, NULL);
    assert_true(snapshot_write(w, path, &err));
    snapshot_writer_free(w);
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);

    Tensor *small = tensor_new2(MEM_TEMP, 65, 64);
    tensor_fill(small, 7.0f);
    tensor_set_name(small, "wte");
    assert_false(snapshot_read_tensor(r, NULL, small, &err));
    snprintf(want, sizeof want, "%s: shape of 'wte' is [65, 128] in the file, [65, 64] expected",
             path);
    assert_string_equal(err.message, want);
    for (size_t i = 0; i < small->size; i++)
        assert_true(small->data[i] == 7.0f);   /* nothing was copied */

    uint16_t halves[65 * 128];
    assert_false(snapshot_read(r, "wte", SNAPSHOT_BF16, 2, (int64_t[]){ 65, 128 }, halves, &err));
    snprintf(want, sizeof want, "%s: dtype of 'wte' is F32 in the file, BF16 expected", path);
    assert_string_equal(err.message, want);
    assert_false(snapshot_read_tensor(r, "wpe", small, &err));
    expect_message(err.message, path, "missing tensor 'wpe'");

    const char *model[] = { "wte" };
    assert_false(snapshot_check_names(r, model, 1, &err));
    snprintf(want, sizeof want, "%s: unknown tensor 'blocks.9.attn.q.weight': in the file, but "
             "not expected", path);
    assert_string_equal(err.message, want);
    const char *bigger[] = { "blocks.9.attn.q.weight", "wpe", "wte" };
    assert_false(snapshot_check_names(r, bigger, 3, &err));
    expect_message(err.message, path, "missing tensor 'wpe': expected, but not in the file");
    const char *exact[] = { "blocks.9.attn.q.weight", "wte" };
    assert_true(snapshot_check_names(r, exact, 2, &err));
    snapshot_close(r);
    tensor_free(wte);
    tensor_free(q);
    tensor_free(small);
}

/* Trainer state: RNG and numbers in metadata ----------------------------------------------------- */

static void test_rng_and_numbers(void **state)
{
    (void)state;
    char path[512];
    in_dir(path, sizeof path, "trainer.safetensors");
    Rng rng = rng_new(42, RNG_STREAM_DATA);
    for (int i = 0; i < 10; i++)
        rng_u32(&rng);
    SnapshotError err;
    SnapshotWriter *w = snapshot_writer_new();
    assert_true(snapshot_add_rng(w, "rng.data", &rng, &err));
    assert_true(snapshot_add_meta(w, "bad.inc", "12", &err));
    assert_true(snapshot_add_meta(w, "bad.state", "1", &err));
    const char *not_u64[] = { "-1", "12a", "", " 1", "18446744073709551616" };
    for (int i = 0; i < 5; i++) {
        char key[16];
        snprintf(key, sizeof key, "n%d", i);
        assert_true(snapshot_add_meta(w, key, not_u64[i], &err));
    }
    assert_true(snapshot_write(w, path, &err));
    snapshot_writer_free(w);
    uint32_t expected[100];
    for (int i = 0; i < 100; i++)
        expected[i] = rng_u32(&rng);

    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    Rng back;
    assert_true(snapshot_read_rng(r, "rng.data", &back, &err));
    for (int i = 0; i < 100; i++)
        assert_int_equal(rng_u32(&back), expected[i]);   /* the run continues exactly */
    assert_false(snapshot_read_rng(r, "rng.init", &back, &err));
    expect_message(err.message, path, "missing metadata 'rng.init.state'");
    assert_false(snapshot_read_rng(r, "bad", &back, &err));
    expect_message(err.message, path, "metadata 'bad.inc' is even");
    for (int i = 0; i < 5; i++) {
        char key[16];
        uint64_t v;
        snprintf(key, sizeof key, "n%d", i);
        assert_false(snapshot_meta_u64(r, key, &v, &err));
        expect_message(err.message, path, "not an unsigned 64-bit integer");
    }
    double x;
    assert_false(snapshot_meta_f64(r, "n1", &x, &err));
    expect_message(err.message, path, "metadata 'n1' is '12a', not a number");
    assert_true(snapshot_meta_f64(r, "bad.inc", &x, &err));
    assert_true(x == 12.0);
    snapshot_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_tensor_round_trip),
        cmocka_unit_test(test_layout_on_disk),
        cmocka_unit_test(test_failed_writes_leave_the_file),
        cmocka_unit_test(test_writer_rejects_bad_entries),
        cmocka_unit_test(test_shape_dtype_and_names),
        cmocka_unit_test(test_rng_and_numbers),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
