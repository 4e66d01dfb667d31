/* train_gpt's LoRA and QLoRA (docs/lora.md): the flags --lora, --lora-alpha, --lora-targets,
 * --qlora, --load-base and --save-adapter, the base the adapters sit on, and what is reported.
 *
 *     train_gpt --task add --separate-qkv --save base.safetensors            # a base
 *     train_gpt --task sub --load-base base.safetensors --lora 8 --save-adapter sub.safetensors
 *
 * --load-base takes the model (its shape and weights) from a file of nn/gpt_snapshot.h or a
 * train_gpt --save snapshot; without --lora it is full fine-tuning of that base. With --lora R
 * the base is frozen, adapters of rank R go on the --lora-targets Linears, and the optimizer
 * holds state for the adapters alone (optim/train.h, trainer_use_lora). Under --precision the
 * frozen base is stored in the policy's parameter dtype without a master copy, and the adapters
 * train with fp32 masters (docs/lora.md, "Precision"). */
#include <stdio.h>
#include <string.h>

#include "examples/common/cli.h"
#include "examples/train_gpt/train_gpt.h"
#include "nn/gpt_snapshot.h"
#include "nn/lora_snapshot.h"
#include "optim/train_snapshot.h"

/* Adapters on q, k or v need separate projections: a fresh model gets them without being asked
 * (the two layouts compute the same function); a base must have been trained with them. */
void lora_check_options(Options *o)
{
    /* Which flags need --lora, or are the snapshot's with --load or the base's with
     * --load-base: the rows' needs (settings.c). */
    if (o->local.save_adapter_path && o->local.load_base_path &&
        strcmp(o->local.save_adapter_path, o->local.load_base_path) == 0)
        cli_usage_error("--save-adapter and --load-base name the same file '%s'",
                        o->local.load_base_path);
    unsigned qkv = LORA_TARGET_Q | LORA_TARGET_K | LORA_TARGET_V;
    if (o->lora.rank > 0 && (o->lora.targets & qkv) && !o->local.load_base_path)
        o->cfg.model.fused_qkv = false;
}

/* The base's shape replaces the one the model flags describe. */
void lora_base_config(const Options *o, GptConfig *model)
{
    SnapshotError err;
    SnapshotReader *r = snapshot_open(o->local.load_base_path, &err);
    if (!r || !gpt_snapshot_read_config(r, o->local.load_base_path, "model", model, &err))
        cli_die(1, "%s", err.message);
    snapshot_close(r);
}

/* The trainer of a fresh run: with --load-base and --lora, trainer_new_lora, whose setting up
 * holds no more than the run will (no optimizer over the frozen base, no second copy of it,
 * under --qlora never the whole fp32 base), so a budget the run fits is not refused before its
 * first step; otherwise trainer_new and lora_setup. */
Trainer *lora_trainer_new(const TrainerConfig *cfg, const Options *o)
{
    if (!o->local.load_base_path || o->lora.rank == 0) {
        Trainer *tr = trainer_new(cfg);
        lora_setup(tr, o);
        return tr;
    }
    SnapshotError err;
    /* The adapters' seed as lora_setup's. */
    Trainer *tr = trainer_new_lora(cfg, &o->lora, o->cfg.seed + 1, o->local.load_base_path, &err);
    if (!tr)
        cli_die(1, "%s", err.message);
    mem_reset_peaks();
    return tr;
}

/* Setting up makes transient copies that are not the run's: the base is read through a model
 * of its own, the optimizer over every parameter that trainer_use_lora replaces, the fp32
 * weights QLoRA quantizes. The peaks restart once they are gone. */
void lora_setup(Trainer *tr, const Options *o)
{
    SnapshotError err;
    if (o->local.load_base_path) {
        /* Under a policy with packed parameters the base's fp32 weights go into the masters,
         * and the packed working copies are made from them. */
        optim_expose_masters(tr->optim);
        bool ok = gpt_snapshot_read_weights(tr->model, o->local.load_base_path, &err);
        optim_pack_masters(tr->optim);
        if (!ok)
            cli_die(1, "%s", err.message);
    }
    if (o->lora.rank == 0) {
        mem_reset_peaks();
        return;
    }
    char why[256];
    if (!lora_config_check(&o->lora, &tr->model->cfg, why, sizeof why))
        cli_die(1, "%s%s%s", o->local.load_base_path ? o->local.load_base_path : "",
                o->local.load_base_path ? ": " : "", why);
    /* A seed of their own: the adapters must not replay the base's initial random numbers. */
    trainer_use_lora(tr, &o->lora, o->cfg.seed + 1);
    mem_reset_peaks();
}

void lora_describe(const Trainer *tr, const Options *o)
{
    if (o->local.load_base_path)
        printf("base: %s\n", o->local.load_base_path);
    if (!tr->lora) {
        if (o->local.load_base_path)
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
           o->local.load_base_path ? "" : " (no --load-base: the frozen model is a random one)");
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

void lora_report(const Trainer *tr)
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
uint64_t lora_base_hash(const Options *o)
{
    if (!o->local.load_base_path)
        return 0;
    FILE *f = fopen(o->local.load_base_path, "rb");
    if (!f)
        cli_die(1, "%s: cannot read the base again to record it", o->local.load_base_path);
    uint64_t h = 14695981039346656037ull;
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 1099511628211ull;
    bool failed = ferror(f);
    fclose(f);
    if (failed)
        cli_die(1, "%s: read error", o->local.load_base_path);
    return h;
}

void lora_merge_snapshot(Options *o, const SnapshotReader *r, const char *path,
                         const GptConfig *model)
{
    LoraConfig lc;
    bool has;
    SnapshotError err;
    if (!train_snapshot_lora(r, path, model, &lc, &has, &err))
        cli_die(1, "%s", err.message);
    if (!has) {
        if (o->local.save_adapter_path)
            cli_usage_error("--save-adapter needs a LoRA run, and the snapshot %s is not one",
                            path);
        return;
    }
    o->lora = lc;
    const char *base = snapshot_meta(r, "lora.base"), *hash = snapshot_meta(r, "lora.base_fnv1a");
    if (!base || !hash)
        cli_die(1, "%s: missing metadata '%s' (was it saved by train_gpt?)", path,
                base ? "lora.base_fnv1a" : "lora.base");
    o->local.load_base_path = *base ? base : NULL;
    char now[32];
    snprintf(now, sizeof now, "%016llx", (unsigned long long)lora_base_hash(o));
    if (strcmp(now, hash) != 0)
        cli_die(1, "%s: the base %s is not the file the run began with (FNV-1a %s, recorded "
                "%s): the adapters would resume on other weights", path, base, now, hash);
}

Trainer *lora_resume(const Options *o, const TrainerConfig *saved, SnapshotReader *r)
{
    Trainer *tr = lora_trainer_new(saved, o);
    SnapshotError err;
    if (!train_snapshot_restore(tr, r, o->local.load_path, &err))
        cli_die(1, "%s", err.message);
    return tr;
}

void lora_save_adapter(const Trainer *tr, const Options *o)
{
    SnapshotError err;
    /* Under a policy the file gets the fp32 masters, not the packed working copies. */
    optim_expose_masters(tr->optim);
    bool ok = lora_snapshot_save(tr->lora, o->local.save_adapter_path, &err);
    optim_pack_masters(tr->optim);
    if (!ok)
        cli_die(1, "%s", err.message);
    printf("adapter: %s\n", o->local.save_adapter_path);
}
