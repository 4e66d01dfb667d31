# Loss curve of train_mlp. Variables: input (the TSV log), output (the PNG).
#   gnuplot -e "input='train_mlp.tsv'; output='train_mlp.png'" examples/train_mlp/loss.gp
set terminal pngcairo size 800,500 noenhanced
set output output
set title "train_mlp: training loss"
set xlabel "step"
set ylabel "cross-entropy loss"
set logscale y
set grid
set key autotitle columnhead
plot input using "step":"loss" with lines lw 2 title "loss"
