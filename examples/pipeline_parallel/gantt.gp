# One measured step of each schedule at p = 4, m = 8: a row per stage (stage 0 on top), forward
# boxes light, backward boxes dark, each labelled by its micro-batch (PipeDream's numbered over
# the run). The box is the compute (input ready to end); waiting for the input is the thin bar
# before it. The four panels share one time axis, so their lengths compare; one legend, under
# the title, serves all four.
# gnuplot -e "dir='docs/figures'; output='pipeline_gantt.png'; term='pngcairo'" gantt.gp
if (!exists("term")) term = 'pngcairo'
set terminal term size 1100,1150 font ",11"
set output output
set datafile separator "\t"
schedules = "naive gpipe 1f1b pipedream"
names = "naive GPipe 1F1B PipeDream"
what = "'one micro-batch through all stages at a time' 'all forwards, then all backwards' 'p - s warm-up forwards on stage s, then one forward, one backward' 'no flush: p-1-s backwards of the previous step on stage s, an update after each backward'"
file(s) = sprintf("%s/pipeline_gantt_%s.tsv", dir, s)
# The longest step of the four sets the common axis.
xmax = 0
do for [s in schedules] {
    stats file(s) skip 1 using 7 nooutput
    xmax = STATS_max > xmax ? STATS_max : xmax
}
xmax = ceil(xmax / 25.0) * 25
# A micro-batch number only where it fits: boxes narrower than about 10 pixels stay unlabelled.
minw = xmax / 100.0
set multiplot layout 4,1 title "One training step of each pipeline schedule: p = 4 stages, m = 8 micro-batches (measured)" \
    font ",13" margins 0.08, 0.97, 0.06, 0.90 spacing 0, 0.07
set ytics ("stage 0" 0, "stage 1" -1, "stage 2" -2, "stage 3" -3)
set yrange [-3.6:0.6]
set xrange [0:xmax]
set style fill solid 0.8 border lc rgb "black"
set key off
box(k) = strcol(4) eq k ? ($6 + $7) / 2 : 1/0
do for [i=1:4] {
    s = word(schedules, i)
    f = file(s)
    set title sprintf("%s: %s", word(names, i), word(what, i))
    # The legend, drawn by hand under the title (a key there wraps), with the first panel only.
    if (i == 1) {
        set object 1 rect from screen 0.20, 0.938 to screen 0.225, 0.954 \
            fc rgb "#9ecae1" fs solid 0.8 border lc rgb "black"
        set label 1 "forward (micro-batch number inside)" at screen 0.232, 0.946 left
        set object 2 rect from screen 0.52, 0.938 to screen 0.545, 0.954 \
            fc rgb "#3182bd" fs solid 0.8 border lc rgb "black"
        set label 2 "backward" at screen 0.552, 0.946 left
        set object 3 rect from screen 0.66, 0.943 to screen 0.685, 0.949 \
            fc rgb "#bbbbbb" fs solid 0.8 border lc rgb "black"
        set label 3 "waiting for the input" at screen 0.692, 0.946 left
    } else {
        unset object 1; unset object 2; unset object 3
        unset label 1; unset label 2; unset label 3
    }
    if (i == 4) { set xlabel "ms from the step's start" }
    plot f skip 1 using (box("F")):(-$2):6:7:(-$2-0.35):(-$2+0.35) with boxxyerror \
             lc rgb "#9ecae1" notitle, \
         f skip 1 using (box("B")):(-$2):6:7:(-$2-0.35):(-$2+0.35) with boxxyerror \
             lc rgb "#3182bd" notitle, \
         f skip 1 using (($5 + $6) / 2):(-$2):5:6:(-$2-0.04):(-$2+0.04) with boxxyerror \
             lc rgb "#bbbbbb" notitle, \
         f skip 1 using (($6 + $7) / 2):(-$2):($7 - $6 >= minw ? strcol(3) : "") with labels \
             font ",9" notitle
}
unset multiplot
