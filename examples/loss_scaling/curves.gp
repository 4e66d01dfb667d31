# train_gpt on its default task at five precisions and an fp32 control on another thread count,
# same seed and steps: training loss (mean of the last 20 steps), validation loss, the training
# loss relative to fp32's, and the loss scale per step. Reads loss_scaling_curves.tsv, written
# by loss_scaling.
#   gnuplot -e "input='loss_scaling_curves.tsv'; output='loss_scaling_curves.png'" curves.gp
# Optional: term='png' when pngcairo is missing.
if (!exists("input")) input = 'loss_scaling_curves.tsv'
if (!exists("output")) output = 'loss_scaling_curves.png'
if (!exists("term")) term = 'pngcairo'

set terminal term size 1300,900 font ",11" enhanced
set output output
set datafile separator "\t"
set datafile missing "nan"
set grid xtics ytics lc rgb "#e0e0e0"
# One key, in the loss-scale panel, which has room: the colours are the same in every panel.
unset key

N = 6
run(i) = word("fp32 bf16 fp16 fp16_dynamic fp8 fp32_control", i)
label(i) = i == 4 ? "fp16 dynamic" : i == 6 ? "fp32 control" : run(i)
title(i) = i == 3 ? "fp16, no loss scaling" : i == 4 ? "fp16, dynamic loss scaling" : \
           i == 6 ? "fp32 on another thread count (control)" : run(i)
pick(i, col) = strcol("run") eq label(i) ? column(col) : NaN
COLORS = "#000000 #1f77b4 #d62728 #2ca02c #9467bd #999999"
DASH(i) = i == 6 ? 2 : 1

set multiplot layout 2,2 \
    title "train\\_gpt, add task, same seed and steps: five precisions and an fp32 control"
set xlabel "step"

set title "training loss (mean of the last 20 steps)"
set logscale y
set format y "%g"
plot for [i=1:N] input using "step":(pick(i, "loss_mean20")) with lines lw 2 dt DASH(i) \
    lc rgb word(COLORS, i) title title(i)

set title "validation loss"
plot for [i=1:N] input using "step":(pick(i, "val_loss")) with linespoints lw 2 pt 7 ps 0.6 \
    dt DASH(i) lc rgb word(COLORS, i) title title(i)

set title "training loss (mean of 20 steps) / fp32's"
plot for [i=2:N] input using "step":(1 + pick(i, "loss_mean20_vs_fp32")) with lines lw 2 \
    dt DASH(i) lc rgb word(COLORS, i) title title(i)

set title "loss scale S (backward is seeded with S)"
set logscale y 2
set format y "2^{%L}"
set yrange [0.5:2**18]
set key center right box opaque
plot for [i=1:N] input using "step":(pick(i, "loss_scale")) with steps lw 2 dt DASH(i) \
    lc rgb word(COLORS, i) title title(i)
unset multiplot
