# DDP and ZeRO 1-3 on 1, 2 and 4 ranks (data_parallel.tsv): per rank, the model states held
# (stacked bars: param, grad, optim, measured by the accounting allocator; black points: the
# ZeRO formulas' total), the bytes sent per step (bars, counted by the communicator; points:
# 2 Psi (N-1)/N for DDP, ZeRO-1, ZeRO-2, the gathers of ZeRO-3 added), and the step time.
set terminal term size 1200,900 font ",10"
set output output
set datafile separator "\t"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.8
set xtics rotate by -45 scale 0
set grid ytics
set key top right
label(x) = sprintf("%s/%d", strcol(1), column(3))
set multiplot layout 3,1
set style histogram rowstacked
set ylabel "model states per rank, MB"
set title "Model states per rank: measured (bars) and the ZeRO formulas (points)"
plot input skip 1 using ($4/1e6):xtic(label(0)) lc rgb "#3182bd" title "param", \
     '' skip 1 using ($5/1e6) lc rgb "#e6550d" title "grad", \
     '' skip 1 using ($6/1e6) lc rgb "#31a354" title "optim", \
     '' skip 1 using 0:(($7+$8+$9)/1e6) with points pt 7 ps 1.2 lc rgb "black" title "predicted"
set style histogram clustered
set ylabel "MB sent per step per rank"
set title "Traffic: measured (bars) and the paper's volumes (points)"
plot input skip 1 using ($15/1e6):xtic(label(0)) lc rgb "#756bb1" title "sent", \
     '' skip 1 using 0:($16/1e6) with points pt 7 ps 1.2 lc rgb "black" title "predicted"
set ylabel "ms per step (median, slowest rank)"
set title "Step time (ranks share 2 cores here: the messages' cost on a busy machine)"
plot input skip 1 using 17:xtic(label(0)) lc rgb "#636363" title "step"
unset multiplot
