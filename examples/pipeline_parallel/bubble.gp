# Bubble fraction against the number of micro-batches m, p = 2 and 4: measured (idle over span,
# wall clock, mean over stages), replayed from each action's CPU time through the schedule, and
# the formula (p-1)/(m+p-1).
set terminal term size 900,600 font ",11"
set output output
set datafile separator "\t"
set logscale x 2
set xlabel "micro-batches m"
set ylabel "bubble: idle share of the step"
set title "Pipeline bubble against the number of micro-batches, p = 2 and 4 stages (measured)" font ",13"
set yrange [0:1]
set key top right
f(m, p) = (p - 1.0) / (m + p - 1.0)
sel(p, s, v) = (column(1) == p && strcol(2) eq s) ? v : 1/0
plot [0.8:20] f(x, 2) lc rgb "#e6550d" dt 2 lw 2 title "(p-1)/(m+p-1), p = 2", \
     f(x, 4) lc rgb "#3182bd" dt 2 lw 2 title "(p-1)/(m+p-1), p = 4", \
     input skip 1 using 3:(sel(2, "gpipe", $4)) with points ps 1.3 pt 7 lc rgb "#e6550d" title "GPipe p = 2, measured", \
     input skip 1 using 3:(sel(2, "1f1b", $4)) with points ps 1.3 pt 5 lc rgb "#e6550d" title "1F1B p = 2, measured", \
     input skip 1 using 3:(sel(4, "gpipe", $4)) with points ps 1.3 pt 7 lc rgb "#3182bd" title "GPipe p = 4, measured", \
     input skip 1 using 3:(sel(4, "1f1b", $4)) with points ps 1.3 pt 5 lc rgb "#3182bd" title "1F1B p = 4, measured", \
     input skip 1 using 3:(sel(4, "gpipe", $5)) with points ps 1.3 pt 6 lc rgb "#3182bd" title "GPipe p = 4, replayed from CPU times", \
     input skip 1 using 3:(sel(4, "1f1b", $5)) with points ps 1.3 pt 4 lc rgb "#3182bd" title "1F1B p = 4, replayed from CPU times"
