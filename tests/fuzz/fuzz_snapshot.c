/* Fuzz harness: the safetensors reader (autograd/snapshot_read.c) on arbitrary bytes.
 *
 * The bytes are written to a file (the reader opens paths), opened, and everything a caller can
 * ask of an open file is asked: every tensor read back with the dtype and shape its own header
 * gives (so the reader's checks pass and the bytes are really copied), every metadata value
 * parsed as an integer and as a double, an RNG state restored. Any result is fine; what must
 * not happen is a crash, a hang, an abort or undefined behaviour (the fuzzer runs this under
 * AddressSanitizer and UBSan). docs/snapshots.md says how to run it.
 *
 * Built two ways: by `make fuzz` with clang -fsanitize=fuzzer, which defines
 * TAPEGRAD_LIBFUZZER and so LLVMFuzzerTestOneInput; and into tests/test_fuzz_replay.c with the
 * normal compiler, which calls fuzz_snapshot_one on every file of tests/fuzz/corpus/snapshot
 * and tests/fuzz/crashes/snapshot. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "autograd/rng.h"
#include "autograd/snapshot.h"
#include "tests/fuzz/fuzz_file.h"

/* A tensor larger than this is not read back (its size was checked against the file's by
 * snapshot_open, so it is really there; reading it would only make the fuzzer slow). */
enum { FUZZ_READ_MAX = 1 << 24 };

static void read_every_tensor(SnapshotReader *r)
{
    for (int i = 0; i < snapshot_count(r); i++) {
        const SnapshotEntry *e = snapshot_entry(r, i);
        uint64_t bytes = e->end - e->begin;
        if (bytes > FUZZ_READ_MAX)
            continue;
        void *buf = malloc(bytes ? bytes : 1);
        if (!buf)
            continue;
        SnapshotError err;
        if (!snapshot_read(r, e->name, e->dtype, e->ndim, e->shape, buf, &err))
            fprintf(stderr, "fuzz_snapshot: a tensor of the header did not read back: %s\n",
                    err.message);
        free(buf);
        if (snapshot_find(r, e->name) == NULL)
            fprintf(stderr, "fuzz_snapshot: '%s' is listed but not found\n", e->name);
    }
}

static void parse_every_meta(const SnapshotReader *r)
{
    for (int i = 0; i < snapshot_meta_count(r); i++) {
        const char *key = snapshot_meta_key(r, i);
        uint64_t u;
        double d;
        SnapshotError err;
        (void)snapshot_meta(r, key);
        (void)snapshot_meta_u64(r, key, &u, &err);
        (void)snapshot_meta_f64(r, key, &d, &err);
    }
    Rng rng;
    SnapshotError err;
    (void)snapshot_read_rng(r, "train.rng", &rng, &err);
}

/* Returns 1 when the bytes opened as a snapshot, 0 when the reader refused them. */
int fuzz_snapshot_one(const uint8_t *data, size_t size)
{
    char path[FUZZ_PATH_LEN];
    if (!fuzz_file_write(data, size, path))
        return 0;
    SnapshotError err;
    SnapshotReader *r = snapshot_open(path, &err);
    if (r) {
        read_every_tensor(r);
        parse_every_meta(r);
        snapshot_close(r);
    }
    unlink(path);
    return r != NULL;
}

#ifdef TAPEGRAD_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_snapshot_one(data, size);
    return 0;
}
#endif
