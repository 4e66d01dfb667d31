# Peak act bytes of each stage (accounting allocator, one process per rank) against m, p = 4:
# GPipe holds all m micro-batches at the turn, 1F1B at most p - s on stage s.
set terminal term size 900,600 font ",11"
set output output
set datafile separator "\t"
set logscale xy 2
set xlabel "micro-batches m"
set ylabel "peak activation memory (MB)"
set title "Peak activation memory per stage, p = 4 (measured)\nGPipe keeps all m micro-batches, 1F1B at most p - s on stage s" font ",13"
set key top left
sel(s, v) = strcol(2) eq s ? v / 1e6 : 1/0
plot input skip 1 using 3:(sel("gpipe", $8)) with linespoints lw 2 pt 7 lc rgb "#3182bd" title "GPipe, stage 0", \
     input skip 1 using 3:(sel("gpipe", $11)) with linespoints lw 2 pt 7 dt 2 lc rgb "#3182bd" title "GPipe, stage 3", \
     input skip 1 using 3:(sel("1f1b", $8)) with linespoints lw 2 pt 5 lc rgb "#e6550d" title "1F1B, stage 0", \
     input skip 1 using 3:(sel("1f1b", $9)) with linespoints lw 2 pt 5 dt 3 lc rgb "#e6550d" title "1F1B, stage 1", \
     input skip 1 using 3:(sel("1f1b", $10)) with linespoints lw 2 pt 5 dt 4 lc rgb "#e6550d" title "1F1B, stage 2", \
     input skip 1 using 3:(sel("1f1b", $11)) with linespoints lw 2 pt 5 dt 2 lc rgb "#e6550d" title "1F1B, stage 3"
