/* Fuzz harness: the whole of train_gpt's --load on arbitrary bytes, as a user's run does it:
 * the options parsed (`train_gpt --load FILE --threads 1`), the snapshot opened, its metadata
 * checked and merged into the options (the flags' own range checks, run/options.c),
 * the data opened, the model checked, then the trainer built and its tensors restored
 * (load_settings and load_trainer in train_gpt.c, which this file includes to reach them).
 *
 * A bad file must end the program with one message and exit status 1: train_gpt calls exit()
 * (cli_die), and exit() would end the fuzzer too. So the harness is linked with
 * -Wl,--wrap=exit: while an input runs, exit() jumps back here instead, and the input counts as
 * handled. What the fuzzer looks for is everything else: abort() (a library check reached from
 * a file: tensor_fatal), a crash, a hang, undefined behaviour. The jump leaks what the run had
 * allocated, as exit() would have: the fuzzer runs this harness with -detect_leaks=0.
 *
 * Models with more than FUZZ_MAX_PARAMS parameters are checked but not built: building one is
 * slow and tells nothing the small ones do not (a file with a layer count of 10^9 is refused by
 * the range checks before this point; 10^4 passes them and would take seconds per input).
 *
 * Built by `make fuzz` (clang -fsanitize=fuzzer) and into tests/test_fuzz_replay.c (gcc). */
#define main train_gpt_main
#include "examples/train_gpt/train_gpt.c"
#undef main

#include <getopt.h>
#include <setjmp.h>

#include "tests/fuzz/fuzz_exit.h"
#include "tests/fuzz/fuzz_file.h"

enum { FUZZ_MAX_PARAMS = 4 << 20 };

/* What an input left behind, freed whether it returned or jumped. */
static Run fuzz_run;

static void fuzz_release(void)
{
    if (fuzz_run.tr)
        trainer_free(fuzz_run.tr);
    if (fuzz_run.ds)
        dataset_free(fuzz_run.ds);
    snapshot_close(fuzz_run.loaded);
    memset(&fuzz_run, 0, sizeof fuzz_run);
}

/* Returns 0 when the file loaded, train_gpt's exit status when it was refused. */
int fuzz_train_load_one(const uint8_t *data, size_t size)
{
    static char path[FUZZ_PATH_LEN];
    if (!fuzz_file_write(data, size, path))
        return 0;
    char *argv[] = { "train_gpt", "--load", path, "--threads", "1", NULL };
    int argc = 5;
    optind = 0;                 /* getopt starts over for every input */
    fuzz_exit_status = 0;
    if (setjmp(fuzz_exit_jump) == 0) {
        fuzz_exit_armed = 1;
        fuzz_run.o = parse(argc, argv);
        TrainerConfig saved = load_settings(&fuzz_run);
        if (gpt_config_n_params(&saved.model) <= FUZZ_MAX_PARAMS)
            fuzz_run.tr = load_trainer(&fuzz_run, &saved);
    }
    fuzz_exit_armed = 0;
    fuzz_release();
    unlink(path);
    return fuzz_exit_status;
}

#ifdef TAPEGRAD_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_train_load_one(data, size);
    return 0;
}
#endif
