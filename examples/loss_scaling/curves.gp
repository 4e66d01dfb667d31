# train_gpt on its default task at five precisions and an fp32 control on another thread count,
# same seed and steps: training loss (mean of the last 20 steps), validation loss, and the
# training loss relative to fp32's against the noise band of the control. Reads
# loss_scaling_curves.tsv, written by loss_scaling.
#   gnuplot -e "input='loss_scaling_curves.tsv'; output='loss_scaling_curves.png'" curves.gp
# Optional: term='png' when pngcairo is missing.
#
# The ratio panel: the control differs from fp32 only in the order of its sums, so how far its
# ratio strays is how far any run strays by chance on this task. It is drawn as a grey band (at
# each step the largest ratio, either way, the control has reached so far); a format's ratio
# inside the band is noise, not an effect of the format. The loss scale, a panel of its own
# before, was flat when the scaler never moved (seed 1: 2^16 for all 2000 steps); its range is
# now in the dynamic run's key entry.
if (!exists("input")) input = 'loss_scaling_curves.tsv'
if (!exists("output")) output = 'loss_scaling_curves.png'
if (!exists("term")) term = 'pngcairo'

set terminal term size 1300,950 font ",11" enhanced
set output output
set datafile separator "\t"
set datafile missing "nan"
set grid xtics ytics lc rgb "#e0e0e0"

N = 6
run(i) = word("fp32 bf16 fp16 fp16_dynamic fp8 fp32_control", i)
label(i) = i == 4 ? "fp16 dynamic" : i == 6 ? "fp32 control" : run(i)
pick(i, col) = strcol("run") eq label(i) ? column(col) : NaN
COLORS = "#000000 #1f77b4 #d62728 #2ca02c #9467bd #999999"
DASH(i) = i == 6 ? 2 : 1

# The dynamic scaler's range over the run, for its key entry.
log2i(v) = int(floor(log(v) / log(2) + 0.5))
stats input using (pick(4, "loss_scale")) nooutput
scale_note = STATS_min == STATS_max ? sprintf("S = 2^{%d} throughout", log2i(STATS_min)) : \
             sprintf("S between 2^{%d} and 2^{%d}", log2i(STATS_min), log2i(STATS_max))
title(i) = i == 3 ? "fp16, no loss scaling" : \
           i == 4 ? sprintf("fp16, dynamic loss scaling (%s)", scale_note) : \
           i == 6 ? "fp32 on another thread count (control)" : run(i)

# The noise band: the largest |log ratio| the control has reached so far. Once a perturbation
# has moved the drop's timing the runs do not meet again (eight seeds in docs/mixed_precision.md:
# the control's final ratio ranges from 0.00089 to 2.3), so the band does not narrow again.
set table $ctrl
plot input using "step":(abs(log(1 + column("loss_mean20_vs_fp32")))) with table \
    if (strcol("run") eq "fp32 control")
unset table
set print $band
m = 0
do for [k=1:|$ctrl|] {
    v = real(word($ctrl[k], 2))
    m = v > m ? v : m
    print sprintf("%s\t%g\t%g", word($ctrl[k], 1), exp(-m), exp(m))
}
unset print

set multiplot title "train\\_gpt, add task, seed 1, same steps: five precisions and an fp32 control" \
    font ",13"
set xlabel "step"
set logscale y
set format y "%g"
set xrange [0:2000]
unset key

set size 0.5, 0.47
set origin 0, 0.48
set title "training loss (mean of the last 20 steps)"
plot for [i=1:N] input using "step":(pick(i, "loss_mean20")) with lines lw 2 dt DASH(i) \
    lc rgb word(COLORS, i) notitle

set origin 0.5, 0.48
set title "validation loss"
plot for [i=1:N] input using "step":(pick(i, "val_loss")) with linespoints lw 2 pt 7 ps 0.6 \
    dt DASH(i) lc rgb word(COLORS, i) notitle

# One key for the three panels: the colours are the same in every panel.
set size 1, 0.48
set origin 0, 0
set title "training loss (mean of 20 steps) / fp32's: inside the grey band is noise"
# down to 0.001: the key sits in the empty bottom of the panel
set yrange [0.001:10]
set key inside bottom right vertical maxrows 4 Left reverse samplen 3 box opaque
plot $band using 1:2:3 with filledcurves fc rgb "#d0d0d0" fs solid 1.0 noborder \
         title "noise: the control's largest ratio so far, either way", \
     1 with lines lw 2 lc rgb word(COLORS, 1) title run(1), \
     for [i=2:5] input using "step":(1 + pick(i, "loss_mean20_vs_fp32")) with lines lw 2 \
         lc rgb word(COLORS, i) title title(i), \
     NaN with lines lw 2 dt DASH(6) lc rgb word(COLORS, 6) title title(6)
unset multiplot
