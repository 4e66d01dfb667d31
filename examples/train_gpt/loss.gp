# Loss curves of train_gpt: training loss every step, validation loss and exact-match accuracy
# at each evaluation (accuracy on the right axis). Variables: input (the TSV log), output (PNG).
#   gnuplot -e "input='run.tsv'; output='run.png'" examples/train_gpt/loss.gp
#   gnuplot -e "input='run.tsv'; output='run.png'; accuracy=0" examples/train_gpt/loss.gp
# Validation cells are empty between evaluations; gnuplot skips them and joins the points.
set terminal pngcairo size 900,540 noenhanced
set output output
set datafile separator "\t"
set title "train_gpt: loss and validation accuracy"
set xlabel "step"
set ylabel "cross-entropy loss per scored token"
set logscale y
set y2label "validation exact match"
set format y "%g"
set y2range [0:1]
set y2tics ("0%%" 0, "20%%" 0.2, "40%%" 0.4, "60%%" 0.6, "80%%" 0.8, "100%%" 1)
set ytics nomirror
set grid
set key below horizontal
# accuracy=0 (train_gpt passes it for text data, which has no exact match) leaves that curve out.
if (!exists("accuracy")) accuracy = 1
losses = 'input using "step":"loss" with lines lw 1 lc rgb "#9ecae1" title "train loss", \
          input using "step":"val_loss" with linespoints lw 2 pt 7 ps 0.6 lc rgb "#08519c" \
                title "validation loss"'
if (accuracy) {
    plot @losses, input using "step":"val_acc" axes x1y2 with linespoints lw 2 pt 5 ps 0.6 \
         lc rgb "#d95f0e" title "validation accuracy"
} else {
    unset y2tics
    unset y2label
    plot @losses
}
