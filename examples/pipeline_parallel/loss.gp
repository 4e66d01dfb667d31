# Training loss against step, synchronous 1F1B (one update a step), PipeDream (an update per
# micro-batch, stale weights stashed) and one process making PipeDream's updates on fresh
# weights, the same tokens; validation loss as points.
# gnuplot -e "input='docs/measured/pipedream_loss.tsv'; output='pipedream_loss.png'; term='pngcairo'" loss.gp
if (!exists("term")) term = 'pngcairo'
set terminal term size 900,600 font ",11"
set output output
set datafile separator "\t"
set xlabel "step (8 micro-batches of 4 x 64 characters)"
set ylabel "loss (nats per character)"
set title "tinyshakespeare, 4 stages, m = 8: 1F1B (1 update a step), PipeDream (8, stale), one process (8, fresh)" font ",12"
set key top right
set grid
plot input skip 1 using 1:2 with lines lw 2 lc rgb "#3182bd" title "1F1B, train", \
     input skip 1 using 1:3 with lines lw 2 lc rgb "#e6550d" title "PipeDream, train", \
     input skip 1 using 1:4 with lines lw 2 lc rgb "#31a354" title "one process, 8 fresh updates a step, train", \
     input skip 1 using 1:($5 > 0 ? $5 : 1/0) with points pt 7 ps 1.5 lc rgb "#3182bd" title "1F1B, validation", \
     input skip 1 using 1:($6 > 0 ? $6 : 1/0) with points pt 5 ps 1.5 lc rgb "#e6550d" title "PipeDream, validation", \
     input skip 1 using 1:($7 > 0 ? $7 : 1/0) with points pt 9 ps 1.5 lc rgb "#31a354" title "one process, validation"
