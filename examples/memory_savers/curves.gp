# The validation loss of the memory savers against fp32's, from memory_savers_curves.tsv
# (written by memory_savers): left, the mean over the seeds of each configuration; right, that
# mean over fp32's mean at the same step, with the 1% and 3% targets marked.
#   gnuplot -e "input='memory_savers_curves.tsv'; output='memory_savers_curves.png'" curves.gp
# Optional: heading='...' (the title), term='png' when pngcairo is missing.
if (!exists("input")) input = 'memory_savers_curves.tsv'
if (!exists("output")) output = 'memory_savers_curves.png'
if (!exists("term")) term = 'pngcairo'
if (!exists("heading")) heading = 'train\_gpt on Tiny Shakespeare, T=64 L=4 H=4 C=128 B=16, 2000 steps, the finished seeds (table)'

set terminal term size 1400,620 font ",11" enhanced
set output output
set datafile separator "\t"
set datafile missing "nan"
set grid xtics ytics lc rgb "#e0e0e0"

N = 9
run(i) = word("fp32 bf16 fp16dyn fp8cur fp8del adam8bit adafactor sqrt accum4", i)
title(i) = i == 1 ? "fp32 AdamW" : i == 3 ? "fp16, dynamic scaling" : \
           i == 4 ? "fp8, current scaling" : i == 5 ? "fp8, delayed scaling" : \
           i == 6 ? "8-bit Adam" : i == 7 ? "Adafactor" : i == 8 ? "sqrt checkpointing" : \
           i == 9 ? "accumulation 4 x B/4" : run(i)
COLORS = "#000000 #1f77b4 #2ca02c #d62728 #ff7f0e #9467bd #8c564b #17becf #7f7f7f"
DASH(i) = i == 8 || i == 9 ? 2 : 1
pick(i, col) = strcol("config") eq run(i) ? column(col) : NaN

set multiplot layout 1,2 title heading
set xlabel "step"
set key top right

set title "validation loss (mean over the seeds)"
plot for [i=1:N] input using "step":(pick(i, "mean")) with linespoints lw 2 pt 7 ps 0.5 \
    dt DASH(i) lc rgb word(COLORS, i) title title(i)

set title "validation loss / fp32's at the same seed and step, mean over the seeds - 1, %"
set ylabel "%"
unset key
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 3 lc rgb "#555555"
set arrow 2 from graph 0, first 3 to graph 1, first 3 nohead dt 3 lc rgb "#aa5555"
set arrow 3 from graph 0, first -1 to graph 1, first -1 nohead dt 3 lc rgb "#555555"
set label 1 "1%" at graph 0.01, first 1 offset 0, 0.5 tc rgb "#555555"
set label 2 "3%" at graph 0.01, first 3 offset 0, 0.5 tc rgb "#aa5555"
plot for [i=2:N] input using "step":(100 * (pick(i, "ratio") - 1)) with linespoints lw 2 \
    pt 7 ps 0.5 dt DASH(i) lc rgb word(COLORS, i) title title(i)
unset multiplot
