# The learning-rate schedules of optim/schedule.h over 1000 steps (warmup 100, cooldown 200),
# as a fraction of the peak, one panel each. Reads the TSV of lr_scaling --schedules.
#   gnuplot -e "input='lr_schedules.tsv'; output='lr_schedules.png'" schedules.gp
# Optional: term='png' when pngcairo is missing.
if (!exists("input")) input = 'lr_schedules.tsv'
if (!exists("output")) output = 'lr_schedules.png'
if (!exists("term")) term = 'pngcairo'

set terminal term size 1200,660 font ",12" noenhanced
set output output
set datafile separator "\t"
set grid xtics ytics lc rgb "#dddddd"
unset key
set yrange [0:1.08]
set xrange [0:1000]
set xtics 200
name(i) = i == 1 ? "gradual warmup, constant" : i == 2 ? "constant warmup, constant" : \
          i == 3 ? "gradual warmup, cosine" : i == 4 ? "no warmup, cosine" : \
          i == 5 ? "gradual warmup, wsd linear" : "gradual warmup, wsd 1-sqrt"
pick(i) = strcol("schedule") eq name(i) ? column("lr") : NaN
set multiplot layout 2,3 title "Learning-rate schedules of optim/schedule.h: 1000 steps, warmup 100, cooldown 200" \
    font ",14"
do for [i=1:6] {
    set title name(i)
    # axis names on the outer panels only: the left column and the bottom row
    if (i == 1 || i == 4) { set ylabel "lr / peak lr" } else { unset ylabel }
    if (i >= 4) { set xlabel "step" } else { unset xlabel }
    plot input using "step":(pick(i)) with lines lw 2 lc rgb "#1f77b4"
}
unset multiplot
