/* trainer_new_lora (optim/train.h): a LoRA or QLoRA trainer on a base read from a file, set up
 * within the memory the run itself will need.
 *
 * trainer_new followed by trainer_use_lora gets there the long way: trainer_new makes an
 * optimizer over every parameter (AdamW's 8 bytes per value, and under a policy 4 more for the
 * masters), the base is read through a second model, and trainer_use_lora then frees the
 * optimizer. Those moments hold 3 to 4 times the run's model states, so under a memory budget
 * (train_gpt --mem-budget, fit_largest --base) a LoRA run could be refused before its first
 * step, though the run itself fits. Here:
 *
 *   1. the model is made with its random values (they are overwritten) and, under QLoRA,
 *      without storage for the block weights (gpt_new_partly with gpt_lora_quantized_param);
 *   2. the trainer gets an optimizer over no parameter, so no state and no master exists;
 *   3. every parameter with storage is read from the file straight into the model, and packed in
 *      place in the policy's param dtype (the frozen base needs no master);
 *   4. the adapters are attached (gpt_lora_new, A drawn from seed), and under QLoRA each block
 *      weight is read into fp32, packed as in step 3, quantized and freed, one at a time;
 *   5. the optimizer over the adapters, with fp32 masters under a policy (trainer_use_lora's).
 *
 * Every value is the one the long way gives: the file's weights, packed with the same scale
 * (policy_current_scale of the fp32 values, as optim_use_master_weights packs), quantized from
 * the same decoded values, the same adapters and the same optimizer. */
#include <stdlib.h>

#include "autograd/policy.h"
#include "nn/gpt_snapshot.h"
#include "optim/train.h"

static bool keep_none(const char *name, void *ctx)
{
    (void)name;
    (void)ctx;
    return false;
}

/* Packs a frozen fp32 parameter in the policy's param dtype, as optim_use_master_weights
 * packs a trained one (without keeping the fp32 values). */
static void pack_frozen(Tensor *p, Dtype param)
{
    if (param == DTYPE_F32)
        return;
    Format f = tensor_dtype_format(param);
    tensor_pack(p, param, policy_current_scale(f, p->data, p->size));
}

typedef struct {
    SnapshotReader *reader;
    const char     *path;
    Dtype           param;
} Fill;

static bool read_one(const Fill *f, Tensor *t, SnapshotError *err)
{
    return snapshot_read_tensor(f->reader, NULL, t, err) &&
           gpt_snapshot_check_finite(f->path, t->name, t->data, t->size, err);
}

/* gpt_lora_quantize_base_from's fill: a block weight read, and packed as the rest is. */
static void fill_weight(Tensor *w, void *ctx)
{
    const Fill *f = ctx;
    SnapshotError err;
    if (!read_one(f, w, &err))
        tensor_fatal("%s", err.message);
    pack_frozen(w, f->param);
}

/* Everything that can be checked before a byte is read: the file's model is cfg's, and holds
 * every parameter as F32 of the right shape. */
static bool check_base(SnapshotReader *r, const char *path, const GptConfig *cfg,
                       SnapshotError *err)
{
    GptConfig file;
    char diff[160], have[160], want[160];
    if (!gpt_snapshot_read_config(r, path, "model", &file, err))
        return false;
    if (gpt_config_diff(&file, cfg, diff, sizeof diff))
        return gpt_snapshot_fail(err, path, "the file holds another model: %s (file: %s; "
                                 "model: %s)", diff, gpt_config_describe(&file, have, sizeof have),
                                 gpt_config_describe(cfg, want, sizeof want));
    return true;
}

static bool check_tensors(SnapshotReader *r, const char *path, const Gpt *m, SnapshotError *err)
{
    int n;
    Tensor *const *params = gpt_params(m, &n);
    for (int i = 0; i < n; i++) {
        const SnapshotEntry *e = snapshot_find(r, params[i]->name);
        if (!e)
            return gpt_snapshot_fail(err, path, "missing tensor '%s'", params[i]->name);
        bool same = e->dtype == SNAPSHOT_F32 && e->ndim == params[i]->ndim;
        for (int d = 0; same && d < e->ndim; d++)
            same = e->shape[d] == params[i]->shape[d];
        if (!same)
            return gpt_snapshot_fail(err, path, "tensor '%s' is not F32 of the model's shape",
                                     params[i]->name);
    }
    return true;
}

Trainer *trainer_new_lora(const TrainerConfig *cfg, const LoraConfig *lc, uint64_t seed,
                          const char *base_path, SnapshotError *err)
{
    SnapshotReader *r = snapshot_open(base_path, err);
    if (!r)
        return NULL;
    if (!check_base(r, base_path, &cfg->model, err)) {
        snapshot_close(r);
        return NULL;
    }
    Gpt *model = gpt_new_partly(&cfg->model, cfg->seed,
                                lc->qlora ? gpt_lora_quantized_param : NULL);
    if (!check_tensors(r, base_path, model, err)) {
        gpt_free(model);
        snapshot_close(r);
        return NULL;
    }
    Trainer *t = trainer_new_around(cfg, model, keep_none, NULL);
    Fill f = { .reader = r, .path = base_path, .param = cfg->policy.param };
    int n;
    Tensor *const *params = gpt_params(model, &n);
    for (int i = 0; i < n; i++) {
        if (!params[i]->data)
            continue;                   /* QLoRA's, filled in step 4 */
        if (!read_one(&f, params[i], err)) {
            trainer_free(t);
            snapshot_close(r);
            return NULL;
        }
        pack_frozen(params[i], f.param);
    }
    /* After the weights, so that a bad file is named before a setting that does not suit it
     * (train_gpt's order, which its tests hold). */
    char why[200];
    if (!lora_config_check(lc, &cfg->model, why, sizeof why)) {
        gpt_snapshot_fail(err, base_path, "%s", why);
        trainer_free(t);
        snapshot_close(r);
        return NULL;
    }
    LoraConfig plain = *lc;
    plain.qlora = false;
    t->lora = gpt_lora_new(model, &plain, seed);
    if (lc->qlora)
        gpt_lora_quantize_base_from(t->lora, fill_weight, &f);
    snapshot_close(r);
    int n_train;
    Tensor *const *train = gpt_lora_params(t->lora, &n_train);
    optim_free(t->optim);
    t->optim = trainer_new_optimizer(&t->cfg, train, n_train);
    return t;
}
