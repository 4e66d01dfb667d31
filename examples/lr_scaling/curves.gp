# Warmup at the largest batch against the base batch (Goyal et al. 2017, figure 2 in miniature):
# validation loss (top) and learning rate (bottom) against examples seen, for SGD (left) and
# AdamW (right). Reads lr_scaling_curves.tsv, written by lr_scaling.
#   gnuplot -e "input='lr_scaling_curves.tsv'; output='lr_scaling_curves.png'" curves.gp
# Optional: term='png' when pngcairo is missing.
if (!exists("input")) input = 'lr_scaling_curves.tsv'
if (!exists("output")) output = 'lr_scaling_curves.png'
if (!exists("term")) term = 'pngcairo'

set terminal term size 1300,900 font ",11" noenhanced
set output output
set datafile separator "\t"
set datafile missing "nan"
set grid xtics ytics lc rgb "#dddddd"
set key bottom left box opaque
set format x "%.0s%c"
curve(i) = i == 1 ? "base batch" : i == 2 ? "no warmup" : i == 3 ? "constant warmup" : "gradual warmup"
pick(opt, i, col) = (strcol("optimizer") eq opt && strcol("curve") eq curve(i)) ? column(col) : NaN
COLORS = "#000000 #d62728 #ff7f0e #1f77b4"

set multiplot layout 2,2 title "largest batch (SGD: linear rule, AdamW: sqrt rule) without and with warmup, against the base batch"
do for [opt in "sgd adamw"] {
    set title opt.": validation loss"
    set logscale y
    set format y "%g"
    set ylabel "validation loss"
    set xlabel "examples seen"
    plot for [i=1:4] input using "examples":(pick(opt, i, "val_loss")) \
        with linespoints lw 2 pt 7 ps 0.8 lc rgb word(COLORS, i) title curve(i)
}
do for [opt in "sgd adamw"] {
    set title opt.": learning rate"
    unset logscale y
    set format y "%g"
    set key top right
    set ylabel "learning rate"
    plot for [i=1:4] input using "examples":(pick(opt, i, "lr")) \
        with lines lw 2 lc rgb word(COLORS, i) title curve(i)
}
unset multiplot
