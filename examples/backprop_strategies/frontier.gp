# Memory against recompute at one chain length: one point per strategy, budget:S for several S
# (one tape at a time: Revolve's schedules) and every:K for several K (a run of K tapes at a
# time), with the Pareto frontier of all measured points as a grey staircase. Reads the TSV of
# backprop_strategies --frontier-log (rows sorted by forward evaluations).
#   gnuplot -e "input='backprop_frontier.tsv'; output='backprop_frontier.png'" frontier.gp
# Optional: term='png' without pngcairo.
if (!exists("input")) input = 'backprop_frontier.tsv'
if (!exists("output")) output = 'backprop_frontier.png'
if (!exists("term")) term = 'pngcairo'

set terminal term size 1000,640 font ",11" noenhanced
set output output
set datafile separator "\t"
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set key top right box opaque
set logscale xy
set autoscale fix
set offsets graph 0.05, graph 0.1, graph 0.15, graph 0.1
set xlabel "layer forward evaluations (recompute)"
set ylabel "peak activation memory (MiB)"
MiB = 1048576.0
stats input using "n" nooutput
set title sprintf("memory against recompute, n = %d layers (measured)", STATS_max)
is(f) = strcol("family") eq f
mem(f) = is(f) ? column("peak_act_bytes") / MiB : NaN
plot input using "forward_evals":(column("pareto") > 0 ? column("peak_act_bytes") / MiB : NaN) \
         with steps lw 8 lc rgb "#dddddd" title "Pareto frontier", \
     input using "forward_evals":(mem("budget")) with linespoints lw 2 pt 7 lc rgb "#1f77b4" \
         title "budget:S (one tape at a time)", \
     input using "forward_evals":(mem("budget")):("S=".strcol("strategy")[8:]) with labels \
         left offset 0.6,0.5 font ",9" tc rgb "#1f77b4" notitle, \
     input using "forward_evals":(mem("every")) with linespoints lw 2 pt 5 lc rgb "#2ca02c" \
         title "every:K (a run of K tapes)", \
     input using "forward_evals":(mem("every")):("K=".strcol("strategy")[7:]) with labels \
         right offset -1.6,-0.3 font ",9" tc rgb "#2ca02c" notitle, \
     input using "forward_evals":(mem("vanilla")) with points pt 9 ps 2.2 lc rgb "#d62728" \
         title "vanilla", \
     input using "forward_evals":(mem("sqrt")) with points pt 11 ps 2.2 lc rgb "#9467bd" \
         title "sqrt", \
     input using "forward_evals":(mem("memory-poor")) with points pt 13 ps 2.2 lc rgb "#ff7f0e" \
         title "memory-poor"
