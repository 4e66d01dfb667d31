# Peak activation memory (left) and time (right) of one forward + backward of causal
# self-attention against the sequence length T, standard against tiled, on log-log axes: a
# line of slope 2 grows as T^2, slope 1 as T. Reads the TSV of attention_memory --log.
#   gnuplot -e "input='attention_memory.tsv'; output='attention_memory.png'" attention_memory.gp
# Optional: term='png' when pngcairo is missing.
if (!exists("input")) input = 'attention_memory.tsv'
if (!exists("output")) output = 'attention_memory.png'
if (!exists("term")) term = 'pngcairo'

set terminal term size 1200,500 font ",11" noenhanced
set output output
set datafile separator "\t"
set datafile missing NaN    # rows of the other attention are NaN: skipped, lines unbroken
set logscale xy 2
set grid xtics ytics lc rgb "#dddddd"
set xlabel "sequence length T"
set key top left box opaque
set offsets graph 0.03, graph 0.03, graph 0.08, graph 0.08
MiB = 1048576.0
is(kind) = strcol("attention") eq kind

set multiplot layout 1,2 title "causal self-attention, one forward + backward"

set title "peak activation memory (act category)"
set ylabel "MiB"
set format y "%g"
mib(kind) = is(kind) ? column("peak_act_bytes") / MiB : NaN
plot input using "T":(mib("standard")) \
         with linespoints lw 2 pt 7 lc rgb "#d62728" title "standard: keeps P [B,H,T,T]", \
     input using "T":(mib("tiled")) \
         with linespoints lw 2 pt 5 lc rgb "#1f77b4" title "tiled: keeps O and L [B,H,T]", \
     input using "T":(mib("standard")):(sprintf("%.3g", mib("standard"))) \
         with labels left offset 0.8,-0.6 font ",9" tc rgb "#d62728" notitle, \
     input using "T":(mib("tiled")):(sprintf("%.3g", mib("tiled"))) \
         with labels left offset 0.8,-0.6 font ",9" tc rgb "#1f77b4" notitle

set title "time"
set ylabel "ms"
plot input using "T":(is("standard") ? column("ms") : NaN) \
         with linespoints lw 2 pt 7 lc rgb "#d62728" title "standard", \
     input using "T":(is("tiled") ? column("ms") : NaN) \
         with linespoints lw 2 pt 5 lc rgb "#1f77b4" title "tiled"

unset multiplot
