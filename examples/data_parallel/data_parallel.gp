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
set xtics rotate by 45 right scale 0
set xrange [-0.6:11.6]
set grid ytics
# The keys sit outside the bars, right of the plots; every panel gets the same margins so the
# bars of one configuration line up from panel to panel.
set key outside right top Left reverse width 1
set lmargin 12
set rmargin 20
set yrange [0:*]
# grey lines between the groups of 1, 2 and 4 ranks
set arrow 1 from 3.5, graph 0 to 3.5, graph 1 nohead lc rgb "#999999" dt 2
set arrow 2 from 7.5, graph 0 to 7.5, graph 1 nohead lc rgb "#999999" dt 2
label(x) = sprintf("%s/%d", strcol(1), column(3))
set multiplot layout 3,1
set style histogram rowstacked
set ylabel "model states per rank, MB"
set title "Model states per rank: measured (bars) and the ZeRO formulas (points)"
plot input skip 1 using ($4/1e6):xtic(label(0)) lc rgb "#3182bd" title "param", \
     '' skip 1 using ($5/1e6) lc rgb "#e6550d" title "grad", \
     '' skip 1 using ($6/1e6) lc rgb "#31a354" title "optim", \
     '' skip 1 using 0:(($7+$8+$9)/1e6) with points pt 7 ps 1.2 lc rgb "black" title "ZeRO formula"
set style histogram clustered
set ylabel "MB sent per step per rank"
set title "Traffic: measured (bars) and the paper's volumes (points)"
plot input skip 1 using ($15/1e6):xtic(label(0)) lc rgb "#756bb1" title "sent", \
     '' skip 1 using 0:($16/1e6) with points pt 7 ps 1.2 lc rgb "black" title "paper's volume"
set key off
set xlabel "mode / number of ranks"
set ylabel "ms per step (median, slowest rank)"
set title "Step time (ranks share 2 cores here: the messages' cost on a busy machine)"
plot input skip 1 using 17:xtic(label(0)) lc rgb "#636363" title "step"
unset multiplot
