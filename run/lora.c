/* A run's LoRA and QLoRA (docs/lora.md): the base the adapters sit on, the trainer built over it,
 * what the header and the report say, the adapters saved alone, and a LoRA run resumed from its
 * snapshot on the very base it began with (by the base file's hash).
 *
 * A base (--load-base) gives the model its shape and weights, from a file of nn/gpt_snapshot.h
 * or a train_gpt --save snapshot; without adapters it is full fine-tuning of that base. With a
 * rank R the base is frozen, adapters of rank R go on the targeted Linears, and the optimizer
 * holds state for the adapters alone (optim/train.h, trainer_use_lora). Under a precision
 * policy the frozen base is stored in the policy's parameter dtype without a master copy, and
 * the adapters train with fp32 masters (docs/lora.md, "Precision"). */
#include <stdio.h>
#include <string.h>

#include "nn/gpt_snapshot.h"
#include "nn/lora_snapshot.h"
#include "optim/train_snapshot.h"
#include "run/run.h"

/* The base's shape replaces the one the model flags describe. */
void run_lora_base_config(const char *base, GptConfig *model)
{
    SnapshotError err;
    SnapshotReader *r = snapshot_open(base, &err);
    if (!r || !gpt_snapshot_read_config(r, base, "model", model, &err))
        run_fail(1, "%s", err.message);
    snapshot_close(r);
}

/* The trainer of a fresh run: with --load-base and --lora, trainer_new_lora, whose setting up
 * holds no more than the run will (no optimizer over the frozen base, no second copy of it,
 * under --qlora never the whole fp32 base), so a budget the run fits is not refused before its
 * first step; otherwise trainer_new and run_lora_setup. */
Trainer *run_lora_trainer_new(const TrainerConfig *cfg, const LoraConfig *lora, uint64_t seed,
                              const char *base)
{
    if (!base || lora->rank == 0) {
        Trainer *tr = trainer_new(cfg);
        run_lora_setup(tr, lora, seed, base);
        return tr;
    }
    SnapshotError err;
    /* The adapters' seed as run_lora_setup's. */
    Trainer *tr = trainer_new_lora(cfg, lora, seed + 1, base, &err);
    if (!tr)
        run_fail(1, "%s", err.message);
    mem_reset_peaks();
    return tr;
}

/* Setting up makes transient copies that are not the run's: the base is read through a model
 * of its own, the optimizer over every parameter that trainer_use_lora replaces, the fp32
 * weights QLoRA quantizes. The peaks restart once they are gone. */
void run_lora_setup(Trainer *tr, const LoraConfig *lora, uint64_t seed, const char *base)
{
    SnapshotError err;
    if (base) {
        /* Under a policy with packed parameters the base's fp32 weights go into the masters,
         * and the packed working copies are made from them. */
        optim_expose_masters(tr->optim);
        bool ok = gpt_snapshot_read_weights(tr->model, base, &err);
        optim_pack_masters(tr->optim);
        if (!ok)
            run_fail(1, "%s", err.message);
    }
    if (lora->rank == 0) {
        mem_reset_peaks();
        return;
    }
    char why[256];
    if (!lora_config_check(lora, &tr->model->cfg, why, sizeof why))
        run_fail(1, "%s%s%s", base ? base : "", base ? ": " : "", why);
    /* A seed of their own: the adapters must not replay the base's initial random numbers. */
    trainer_use_lora(tr, lora, seed + 1);
    mem_reset_peaks();
}

void run_lora_describe(const Trainer *tr, const char *base)
{
    if (base)
        printf("base: %s\n", base);
    if (!tr->lora) {
        if (base)
            printf("fine-tuning every parameter of the base\n");
        return;
    }
    char targets[64];
    const LoraConfig *c = &tr->lora->cfg;
    printf("%s: rank %d, alpha %g (scale %g) on %s; %zu trainable parameters of %zu (%.2f%%)"
           "%s\n", c->qlora ? "QLoRA" : "LoRA", c->rank, (double)c->alpha,
           (double)c->alpha / c->rank, lora_targets_str(c->targets, targets, sizeof targets),
           gpt_lora_n_trainable(tr->lora), gpt_n_params(tr->model),
           100.0 * (double)gpt_lora_n_trainable(tr->lora) / (double)gpt_n_params(tr->model),
           base ? "" : " (no --load-base: the frozen model is a random one)");
    const char *param = tensor_dtype_name(tr->cfg.policy.param);
    if (tr->cfg.policy.param == DTYPE_F32)
        return;
    if (c->qlora)
        printf("QLoRA: the frozen base is NF4 (embeddings, LayerNorms, biases %s), without "
               "master weights; only the adapters have fp32 masters\n", param);
    else
        printf("LoRA: the frozen base is %s, without master weights; only the adapters have "
               "fp32 masters\n", param);
}

void run_lora_report(const Trainer *tr)
{
    if (!tr->lora)
        return;
    LoraBaseBytes b = gpt_lora_base_bytes(tr->lora);
    printf("trainable        %zu (adapters only; the base is frozen)\n",
           gpt_lora_n_trainable(tr->lora));
    /* Under a policy what QLoRA leaves unquantized is packed like the rest of the base. */
    size_t rest_values = b.fp32_values + b.packed_values;
    size_t rest_bytes = b.fp32_bytes + b.packed_bytes;
    const char *rest = b.packed_values > 0 ? tensor_dtype_name(tr->cfg.policy.param) : "fp32";
    if (b.quant_values > 0)
        printf("frozen base      %zu bytes: %zu NF4 weights in %zu bytes (%.3f bits each),\n"
               "                 %zu %s values (embeddings, LayerNorms, biases) in %zu bytes\n",
               b.quant_bytes + rest_bytes, b.quant_values, b.quant_bytes,
               8.0 * (double)b.quant_bytes / (double)b.quant_values, rest_values, rest,
               rest_bytes);
    else if (b.packed_values > 0)
        printf("frozen base      %zu bytes (%s, %.3g bytes per value; frozen, so no fp32 "
               "master)\n", rest_bytes, rest, (double)rest_bytes / (double)rest_values);
    else
        printf("frozen base      %zu bytes (fp32)\n", rest_bytes);
}

/* FNV-1a (64 bits) of the base file's bytes: a resumed run must sit on the very weights it
 * began with, and a base replaced since would resume silently on others. 0 without a base. */
uint64_t run_lora_base_hash(const char *base)
{
    if (!base)
        return 0;
    FILE *f = fopen(base, "rb");
    if (!f)
        run_fail(1, "%s: cannot read the base again to record it", base);
    uint64_t h = 14695981039346656037ull;
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 1099511628211ull;
    bool failed = ferror(f);
    fclose(f);
    if (failed)
        run_fail(1, "%s: read error", base);
    return h;
}

void run_lora_merge_snapshot(LoraConfig *lora, RunLocal *local, const SnapshotReader *r,
                             const char *path, const GptConfig *model)
{
    LoraConfig lc;
    bool has;
    SnapshotError err;
    if (!train_snapshot_lora(r, path, model, &lc, &has, &err))
        run_fail(1, "%s", err.message);
    if (!has) {
        if (local->save_adapter_path)
            run_fail(2, "--save-adapter needs a LoRA run, and the snapshot %s is not one", path);
        return;
    }
    *lora = lc;
    RunRecord rec = { .lora = true };       /* the record's lora.* rows (run/run.h) */
    if (!schema_read(&RUN_RECORD_SCHEMA, NULL, schema_reader_value, r, path, &rec, &err))
        run_fail(1, "%s", err.message);
    local->load_base_path = rec.lora_base && *rec.lora_base ? rec.lora_base : NULL;
    uint64_t now = run_lora_base_hash(local->load_base_path);
    if (now != rec.lora_base_fnv1a)
        run_fail(1, "%s: the base %s is not the file the run began with (FNV-1a %016llx, "
                 "recorded %016llx): the adapters would resume on other weights", path,
                 rec.lora_base, (unsigned long long)now,
                 (unsigned long long)rec.lora_base_fnv1a);
}

Trainer *run_lora_resume(const TrainerConfig *saved, const LoraConfig *lora, uint64_t seed,
                         const char *base, SnapshotReader *r, const char *path)
{
    Trainer *tr = run_lora_trainer_new(saved, lora, seed, base);
    SnapshotError err;
    if (!train_snapshot_restore(tr, r, path, &err))
        run_fail(1, "%s", err.message);
    return tr;
}

void run_lora_save_adapter(const Trainer *tr, const char *path)
{
    SnapshotError err;
    /* Under a policy the file gets the fp32 masters, not the packed working copies. */
    optim_expose_masters(tr->optim);
    bool ok = lora_snapshot_save(tr->lora, path, &err);
    optim_pack_masters(tr->optim);
    if (!ok)
        run_fail(1, "%s", err.message);
    printf("adapter: %s\n", path);
}
