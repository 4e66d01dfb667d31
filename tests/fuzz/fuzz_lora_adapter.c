/* Fuzz harness: a LoRA adapter file (nn/lora_snapshot.h, what train_gpt --save-adapter writes and
 * lora_snapshot_load reads back on top of a base) on arbitrary bytes.
 *
 * The bytes are written to a file and read twice: onto a fixed tiny base (V 11, T 8, one block,
 * C 16, 2 heads, tied, fused q/k/v), where an adapter of any other shape must be refused with a
 * message; and, when the file's own recorded base shape passes gpt_config_check and is small,
 * onto a fresh base of that shape, so that the tensor names, shapes and values are reached too.
 * A refusal is fine; a crash, a hang, an abort (tensor_fatal from a value no check caught) or
 * undefined behaviour is what the fuzzer looks for (AddressSanitizer and UBSan).
 *
 * Built by `make fuzz` (scripts/fuzz.sh) with clang -fsanitize=fuzzer. Seeds:
 * tests/fuzz/corpus/lora_adapter (adapters train_gpt saved: q,v at rank 2; all targets at rank 1
 * on separate q/k/v; QLoRA). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "autograd/snapshot.h"
#include "nn/gpt.h"
#include "nn/gpt_lora.h"
#include "nn/lora_snapshot.h"
#include "tests/fuzz/fuzz_file.h"

/* Bases larger than this are not built: slow, and nothing a small one does not show. */
enum { FUZZ_ADAPTER_MAX_PARAMS = 1 << 20 };

/* Whether the adapter loaded onto a fresh base of that shape. */
static bool load_onto(const GptConfig *base, const char *path)
{
    Gpt *model = gpt_new(base, 1);
    SnapshotError err;
    GptLora *lora = lora_snapshot_load(model, path, &err);
    if (lora)
        gpt_lora_free(lora);
    gpt_free(model);
    return lora != NULL;
}

/* 0 when the file loaded onto a base, 1 when it was refused. */
int fuzz_lora_adapter_one(const uint8_t *data, size_t size)
{
    static char path[FUZZ_PATH_LEN];
    if (!fuzz_file_write(data, size, path))
        return 1;
    static const GptConfig tiny = { .vocab_size = 11, .max_seq = 8, .n_layer = 1, .n_head = 2,
                                    .n_embd = 16, .tied = true, .fused_qkv = true };
    bool loaded = load_onto(&tiny, path);
    SnapshotError err;
    SnapshotReader *r = snapshot_open(path, &err);
    if (r) {
        LoraConfig cfg;
        GptConfig base;
        char why[256];
        bool own = lora_snapshot_config(r, path, &cfg, &base, &err) &&
                   gpt_config_check(&base, why, sizeof why) &&
                   gpt_config_n_params(&base) <= FUZZ_ADAPTER_MAX_PARAMS;
        snapshot_close(r);
        if (own)
            loaded |= load_onto(&base, path);
    }
    unlink(path);
    return loaded ? 0 : 1;
}

#ifdef TAPEGRAD_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_lora_adapter_one(data, size);
    return 0;
}
#endif
