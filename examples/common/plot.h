#ifndef TAPEGRAD_PLOT_H
#define TAPEGRAD_PLOT_H
/* Figures: run gnuplot on a script kept next to the program, with the file names passed as
 * gnuplot variables, so the script can be restyled and rerun by hand:
 *
 *     gnuplot -e "input='run.tsv'; output='run.png'" examples/train_gpt/loss.gp
 *
 * The script reads `input` and does `set output output`. gnuplot runs directly (no shell, so
 * no quoting trouble beyond gnuplot's own: a ' in a value is doubled). Its PNG goes to a
 * temporary file beside OUTPUT first (autograd/outfile.h) and is renamed to OUTPUT only when
 * gnuplot succeeded and left a non-empty PNG there, so a failed plot leaves an earlier figure
 * intact and no stray file.
 *
 * A missing gnuplot or a failing script is not a failure of the run: the numbers are in the
 * TSV already. plot_run prints one line on stderr saying what happened and the command that
 * would make the figure later, and returns the status for the caller to act on if it wants. */

typedef enum {
    PLOT_OK,
    PLOT_NO_GNUPLOT,      /* gnuplot is not installed (not on PATH) */
    PLOT_FAILED,          /* gnuplot ran and failed (an error in the script, a bad input) */
} PlotStatus;

/* input and output become the gnuplot variables `input` and `output`. */
PlotStatus plot_run(const char *script, const char *input, const char *output);

/* Any variables: names[i] = 'values[i]' for i < n, set in this order before the script runs.
 * When output_var names one of them, its value is treated as the output file (written via a
 * temporary file as above). */
PlotStatus plot_run_vars(const char *script, const char *const *names,
                         const char *const *values, int n, const char *output_var);

#endif
