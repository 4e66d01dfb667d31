# Peak activation memory against the chain length n, one line per strategy, on a log scale
# (vanilla grows as n, sqrt as about 4 sqrt(n) layers' worth, budget:S stays flat). Reads the
# sweep TSV of backprop_strategies --log.
#   gnuplot -e "input='backprop_strategies.tsv'; output='backprop_memory.png'" memory.gp
# Optional: strategies='vanilla sqrt ...' (the lines to draw), term='png' without pngcairo.
if (!exists("input")) input = 'backprop_strategies.tsv'
if (!exists("output")) output = 'backprop_memory.png'
if (!exists("term")) term = 'pngcairo'
if (!exists("strategies")) \
    strategies = 'vanilla memory-poor sqrt every:4 budget:2 budget:4 budget:8'

set terminal term size 900,560 font ",11" noenhanced
set output output
set datafile separator "\t"
# The colours and markers of forwards.gp, so the two figures read together.
set linetype 1 lc rgb "#d62728" lw 2 pt 7
set linetype 2 lc rgb "#ff7f0e" lw 2 pt 5
set linetype 3 lc rgb "#9467bd" lw 2 pt 6
set linetype 4 lc rgb "#2ca02c" lw 2 pt 9
set linetype 5 lc rgb "#1f77b4" lw 2 pt 11
set linetype 6 lc rgb "#17becf" lw 2 pt 13
set linetype 7 lc rgb "#8c564b" lw 2 pt 15
set linetype 8 lc rgb "#e377c2" lw 2 pt 4
set linetype cycle 8
set grid xtics ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 3
set logscale y
set title "peak activation memory of one forward + backward (act category, measured)" font ",13"
set xlabel "layers n"
set ylabel "peak activation memory (MiB)"
MiB = 1048576.0
stats input using "n" nooutput
set xrange [STATS_min:STATS_max]
plot for [s in strategies] input \
    using "n":(strcol("strategy") eq s ? column("peak_act_bytes") / MiB : NaN) \
    with linespoints ps (s eq "sqrt" ? 1.5 : 0.9) title s
