# Segment forward evaluations (recorded or not) against the chain length n, one line per
# strategy, on a log scale; the references n (vanilla) and 2n + sqrt(n) (the sqrt target) are
# wide pale bands under the lines, named in the key: drawn as thin lines they vanished
# under vanilla's line (which is n exactly) and under sqrt's and every:4's.
# Reads the sweep TSV of backprop_strategies --log.
#   gnuplot -e "input='backprop_strategies.tsv'; output='backprop_forwards.png'" forwards.gp
# Optional: strategies='vanilla sqrt ...' (the lines to draw), term='png' without pngcairo.
if (!exists("input")) input = 'backprop_strategies.tsv'
if (!exists("output")) output = 'backprop_forwards.png'
if (!exists("term")) term = 'pngcairo'
if (!exists("strategies")) \
    strategies = 'vanilla memory-poor sqrt every:4 budget:2 budget:4 budget:8'

set terminal term size 900,560 font ",11" noenhanced
set output output
set datafile separator "\t"
# A marker of its own per line: sqrt's and every:4's counts nearly coincide (sqrt's open circles
# are drawn larger, to show through).
set linetype 1 lc rgb "#d62728" lw 2 pt 7
set linetype 2 lc rgb "#ff7f0e" lw 2 pt 5
set linetype 3 lc rgb "#9467bd" lw 2 pt 6
set linetype 4 lc rgb "#2ca02c" lw 2 pt 9
set linetype 5 lc rgb "#1f77b4" lw 2 pt 11
set linetype 6 lc rgb "#17becf" lw 2 pt 13
set linetype 7 lc rgb "#8c564b" lw 2 pt 15
set linetype 8 lc rgb "#e377c2" lw 2 pt 4
set linetype cycle 8
set grid xtics ytics mytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 3
set logscale y
set title "layer forward evaluations in one forward + backward (counted)" font ",13"
set xlabel "layers n"
set ylabel "forward evaluations"
stats input using "n" nooutput
set xrange [STATS_min:STATS_max]
plot x with lines lw 12 lc rgb "#c8c8c8" title "reference: n", \
     2 * x + sqrt(x) with lines lw 12 lc rgb "#f2d98c" title "reference: 2n + sqrt(n)", \
     for [i=1:words(strategies)] input \
         using "n":(strcol("strategy") eq word(strategies, i) ? column("forward_evals") : NaN) \
         with linespoints lt i ps (word(strategies, i) eq "sqrt" ? 1.5 : 0.9) title word(strategies, i)
