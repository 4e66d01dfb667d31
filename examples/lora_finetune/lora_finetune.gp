# lora_finetune's figure: one group of bars per run (the base before fine-tuning, full
# fine-tuning, LoRA at each rank, QLoRA), six panels: parameters trained; peak bytes per memory
# category while training; the frozen base's bytes; the fastest step's time; exact match on the new
# task and on the old one; the old task's validation loss (forgetting, graded). Cells that do not
# apply (the base trains nothing) are empty in the TSV and draw no bar.
#   gnuplot -e "input='lora_finetune.tsv'; output='lora_finetune.png'" lora_finetune.gp
if (!exists("input")) input = 'lora_finetune.tsv'
if (!exists("output")) output = 'lora_finetune.png'
if (!exists("term")) term = 'pngcairo'

set terminal term size 1400,820 font ",10" noenhanced
set output output
set datafile separator "\t"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set grid ytics lc rgb "#dddddd"
set xtics rotate by -30 scale 0
set key top right
KiB = 1024.0

set multiplot layout 2,3 title "fine-tuning a base pretrained on one task to another, measured"

set title "parameters trained"
set logscale y
set yrange [100:*]
set format y "%.0s%c"
plot input using "trainable":xtic(1) lc rgb "#1f77b4" notitle

set title "peak KiB while training, per memory category"
set yrange [1:*]
set key top left horizontal
plot input using (column("peak_param") / KiB):xtic(1) lc rgb "#7f7f7f" title "param", \
     "" using (column("peak_grad") / KiB) lc rgb "#d62728" title "grad", \
     "" using (column("peak_optim") / KiB) lc rgb "#ff7f0e" title "optim", \
     "" using (column("peak_act") / KiB) lc rgb "#2ca02c" title "act"

set title "frozen base, KiB (fp32, or NF4 + fp32 for QLoRA)"
set key top right
plot input using (column("frozen_bytes") > 0 ? column("frozen_bytes") / KiB : NaN):xtic(1) \
     lc rgb "#8c564b" notitle
unset logscale y
set format y "%g"

set title "time of the fastest training step (ms)"
set yrange [0:*]
plot input using "ms_per_step":xtic(1) lc rgb "#9467bd" notitle

set title "exact match, greedy decoding (base: before fine-tuning)"
set yrange [0:1.2]
set ytics ("0%%" 0, "25%%" 0.25, "50%%" 0.5, "75%%" 0.75, "100%%" 1)
set key top right horizontal
# Each bar's value above it, so a 0% (a task lost entirely) reads as a value, not a missing bar.
# Clustered with gap 1, the two bars of row i are centred at i -+ 1/6.
pct(c) = sprintf("%.0f%%", 100 * column(c))
plot input using "acc_new":xtic(1) lc rgb "#2ca02c" title "new task", \
     "" using "acc_old" lc rgb "#8c564b" title "old task", \
     "" using ($0 - 1/6.0):(column("acc_new") + 0.04):(pct("acc_new")) with labels font ",8" \
         tc rgb "#2ca02c" notitle, \
     "" using ($0 + 1/6.0):(column("acc_old") + 0.04):(pct("acc_old")) with labels font ",8" \
         tc rgb "#8c564b" notitle
set ytics autofreq

set title "old task's validation loss (forgetting; log scale)"
set logscale y
set yrange [*:*]
set format y "%g"
plot input using "loss_old":xtic(1) lc rgb "#8c564b" notitle

unset multiplot
