# One measured step of each schedule at p = 4, m = 8: a row per stage (stage 0 on top), forward
# boxes light, backward boxes dark, each labelled by its micro-batch. The box is the compute
# (input ready to end); waiting for the input is the thin bar before it.
# gnuplot -e "dir='docs/figures'; output='pipeline_gantt.png'; term='pngcairo'" gantt.gp
set terminal term size 1100,900 font ",10"
set output output
set datafile separator "\t"
set multiplot layout 3,1
set ytics ("stage 0" 0, "stage 1" -1, "stage 2" -2, "stage 3" -3)
set yrange [-3.6:0.6]
set xlabel "ms from the step's start"
set key off
set style fill solid 0.8 border lc rgb "black"
box(k) = strcol(4) eq k ? ($6 + $7) / 2 : 1/0
do for [s in "naive gpipe 1f1b"] {
    set title sprintf("%s (p = 4, m = 8), measured", s)
    f = sprintf("%s/pipeline_gantt_%s.tsv", dir, s)
    plot f skip 1 using (box("F")):(-$2):6:7:(-$2-0.35):(-$2+0.35) with boxxyerror lc rgb "#9ecae1", \
         f skip 1 using (box("B")):(-$2):6:7:(-$2-0.35):(-$2+0.35) with boxxyerror lc rgb "#3182bd", \
         f skip 1 using (($5 + $6) / 2):(-$2):5:6:(-$2-0.04):(-$2+0.04) with boxxyerror lc rgb "#bbbbbb", \
         f skip 1 using (($6 + $7) / 2):(-$2):3 with labels font ",8"
}
unset multiplot
