# The four panels of scaling_laws (docs/scaling_laws.md): the IsoFLOP profiles (cooldown losses,
# seeds' range as error bars, parabolas, vertices with their 5-95% over the seeds), N_opt(C) and
# D_opt(C) with both fits, the Kaplan-style fit of the same runs and the papers' slopes, and the
# compute-optimal D/N against C. scaling_laws passes every variable; by hand, from its --out DIR:
#   gnuplot -e "points='DIR/scaling_points.tsv'; isoflop='DIR/scaling_isoflop.tsv'; \
#       optimal='DIR/scaling_optimal.tsv'; kaplan='DIR/scaling_optimal_kaplan.tsv'; \
#       lines='DIR/scaling_lines.tsv'; output='x.png'; nb='4'; \
#       budgets='1e+10 1.78e+10 3.16e+10 5.62e+10'; a2='0.6'; a3='0.5'; k2='0.7'" \
#       examples/scaling_laws/scaling_laws.gp
set terminal pngcairo size 1300,1000 noenhanced
set output output
set datafile separator "\t"
nbv = nb + 0
set multiplot layout 2,2 title "Scaling laws of tiny character-level GPTs: cooldown branches, Chinchilla's approaches 2 and 3, Kaplan's choices"

set title "IsoFLOP profiles (N every parameter, cooldown losses; bars: the seeds' range)"
set logscale x
set format x "%.0e"
set xlabel "parameters N (all)"
set ylabel "validation loss (nats per character)"
set grid
# The key in two columns above the profiles, in headroom made for it, so that it covers no point.
set offsets 0, 0, graph 0.3, 0
set key top right maxrows 4 width -2
plot for [i=0:nbv-1] points using "N":(column("budget_index") == i ? column("loss") : NaN):"loss_lo":"loss_hi" \
         with yerrorbars pt 7 ps 0.9 lc i+1 title sprintf("C = %s", word(budgets, i+1)), \
     for [i=0:nbv-1] isoflop using "N":(column("budget_index") == i ? column("parabola") : NaN) \
         with lines lw 2 lc i+1 notitle, \
     optimal using "N_opt":"loss_opt":"N_lo":"N_hi" with xerrorbars pt 5 ps 1.2 lc rgb "black" \
         title "vertices, 5-95% over the seeds"

set offsets 0, 0, 0, 0
set key maxrows auto width 0
set title "N_opt(C)"
set logscale xy
set format y "%.0e"
set xlabel "compute C = 6ND (FLOP)"
set ylabel "compute-optimal N"
set key top left
plot optimal using "budget":"N_opt":"N_lo":"N_hi" with yerrorbars pt 7 ps 1.2 lc rgb "#08519c" title "approach 2 vertices", \
     lines using "C":"N_a2" with lines lw 2 lc rgb "#08519c" title sprintf("approach 2: a = %s", a2), \
     lines using "C":"N_a3" with lines lw 2 dt 2 lc rgb "#d95f0e" title sprintf("approach 3: a = %s", a3), \
     kaplan using "budget":"N_opt" with points pt 6 ps 1.2 lc rgb "#31a354" title "Kaplan-style vertices", \
     lines using "C":"N_k2" with lines lw 2 dt 4 lc rgb "#31a354" title sprintf("Kaplan-style: a = %s", k2), \
     lines using "C":"N_073" with lines lw 1 dt 3 lc rgb "#777777" title "slope 0.73 (Kaplan)", \
     lines using "C":"N_050" with lines lw 1 dt 3 lc rgb "#000000" title "slope 0.5 (Chinchilla)"

set title "D_opt(C) = C / (6 N_opt), in characters"
set ylabel "compute-optimal D (characters)"
plot optimal using "budget":"D_opt":"D_lo":"D_hi" with yerrorbars pt 7 ps 1.2 lc rgb "#08519c" title "approach 2 vertices", \
     lines using "C":"D_a2" with lines lw 2 lc rgb "#08519c" title "approach 2", \
     lines using "C":"D_a3" with lines lw 2 dt 2 lc rgb "#d95f0e" title "approach 3", \
     kaplan using "budget":"D_opt" with points pt 6 ps 1.2 lc rgb "#31a354" title "Kaplan-style vertices", \
     lines using "C":"D_k2" with lines lw 2 dt 4 lc rgb "#31a354" title "Kaplan-style", \
     lines using "C":"D_027" with lines lw 1 dt 3 lc rgb "#777777" title "slope 0.27 (Kaplan)", \
     lines using "C":"D_050" with lines lw 1 dt 3 lc rgb "#000000" title "slope 0.5 (Chinchilla)"

set title "compute-optimal D / N (characters; / 4 for BPE tokens, assumed)"
set ylabel "D_opt / N_opt (characters)"
set offsets 0, 0, graph 0.4, 0
set key top right maxrows auto width 0
plot optimal using "budget":"tpp":"tpp_lo":"tpp_hi" with yerrorbars pt 7 ps 1.2 lc rgb "#08519c" title "approach 2 vertices", \
     lines using "C":"tpp_a2" with lines lw 2 lc rgb "#08519c" title "approach 2", \
     lines using "C":"tpp_a3" with lines lw 2 dt 2 lc rgb "#d95f0e" title "approach 3", \
     kaplan using "budget":"tpp" with points pt 6 ps 1.2 lc rgb "#31a354" title "Kaplan-style vertices", \
     lines using "C":"tpp_k2" with lines lw 2 dt 4 lc rgb "#31a354" title "Kaplan-style", \
     lines using "C":"tpp_20bpe" with lines lw 1 dt 3 lc rgb "#000000" title "Chinchilla's 20 BPE tokens = 80 characters"
unset multiplot
