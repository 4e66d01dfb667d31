# Peak activation memory of one training step against the number of layers, for the three
# checkpointing strategies: the formula of plan/memcalc.c (lines) and the bytes
# autograd/mem measured (points). Reads the TSV of memory_calculator --sweep.
#   gnuplot -e "input='memory_strategies.tsv'; output='memory_strategies.png'" memory_strategies.gp
# Optional: term='png' when pngcairo is missing.
if (!exists("input")) input = 'memory_strategies.tsv'
if (!exists("output")) output = 'memory_strategies.png'
if (!exists("term")) term = 'pngcairo'

set terminal term size 900,560 font ",11" noenhanced
set output output
set datafile separator "\t"
set grid xtics ytics lc rgb "#dddddd"
set xlabel "layers L"
set ylabel "peak act (MiB)"
set key top left box opaque
set title "activation memory of one training step: formula (lines) and measured (points)"
MiB = 1048576.0
pick(kind, col) = strcol("strategy") eq kind ? column(col) / MiB : NaN
set datafile missing NaN
S = "vanilla sqrt memory-poor"
plot for [i=1:3] input using "layers":(pick(word(S, i), "predicted_act")) \
         with lines lw 2 lc i title word(S, i)." (formula)", \
     for [i=1:3] input using "layers":(pick(word(S, i), "measured_act")) \
         with points pt 7 ps 1.3 lc i title word(S, i)." (measured)"
