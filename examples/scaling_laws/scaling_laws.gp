# The four panels of scaling_laws (docs/scaling_laws.md): IsoFLOP profiles with their parabolas
# (approach 2), N_opt(C) and D_opt(C) with the fitted power laws, and contours of approach 3's
# L(N, D) with the runs on them. scaling_laws passes every variable; by hand, from its --out DIR:
#   gnuplot -e "points='DIR/scaling_points.tsv'; isoflop='DIR/scaling_isoflop.tsv'; \
#       optimal='DIR/scaling_optimal.tsv'; lines='DIR/scaling_lines.tsv'; output='x.png'; \
#       nb='3'; budgets='1.5e10 4e10 1e11'; E='1.2'; A='60'; B='300'; alpha='0.4'; beta='0.3'; \
#       nlo='3e3'; nhi='2e5'; dlo='1e4'; dhi='5e6'" examples/scaling_laws/scaling_laws.gp
# (E, A, B, alpha, beta: approach 3's constants, scaling_fit.tsv; nlo..dhi: the runs' ranges.)
set terminal pngcairo size 1300,1000 noenhanced
set output output
set datafile separator "\t"
Ev = E + 0.0; Av = A + 0.0; Bv = B + 0.0; al = alpha + 0.0; be = beta + 0.0
nbv = nb + 0
law(n, d) = Ev + Av / n**al + Bv / d**be
set multiplot layout 2,2 title "Scaling laws of tiny character-level GPTs (Chinchilla approaches 2 and 3)"

set title "IsoFLOP profiles: validation loss against N at fixed C = 6ND, parabolas in log N"
set logscale x
set format x "%.0e"
set xlabel "non-embedding parameters N"
set ylabel "validation loss (nats per character)"
set grid
set key top left
plot for [i=0:nbv-1] points using "N":(column("budget_index") == i ? column("val_loss") : NaN) \
         with points pt 7 ps 1.1 lc i+1 title sprintf("C = %s", word(budgets, i+1)), \
     for [i=0:nbv-1] isoflop using "N":(column("budget_index") == i ? column("parabola") : NaN) \
         with lines lw 2 lc i+1 notitle

set title "N_opt(C): parabola minima and fitted power laws"
set logscale xy
set format y "%.0e"
set xlabel "compute C = 6ND (FLOP)"
set ylabel "compute-optimal N"
# bottom right: the corner the lines leave empty in both N_opt and D_opt panels
set key bottom right
plot optimal using "budget":"N_opt" with points pt 7 ps 1.4 lc rgb "#08519c" title "approach 2 minima", \
     lines using "C":"N_opt_a2" with lines lw 2 lc rgb "#08519c" title "approach 2 power law", \
     lines using "C":"N_opt_a3" with lines lw 2 dt 2 lc rgb "#d95f0e" title "approach 3 L(N, D)", \
     lines using "C":"N_opt_20" with lines lw 1 dt 3 lc rgb "#555555" title "D = 20 N"

# The bottom row leaves room under its plots for the contour panel's key (below the plot, where
# it covers no run); both panels get the same margin, so their axes stay level.
set bmargin 7.5
set title "D_opt(C) = C / (6 N_opt)"
set ylabel "compute-optimal D (tokens)"
plot optimal using "budget":"D_opt" with points pt 7 ps 1.4 lc rgb "#08519c" title "approach 2 minima", \
     lines using "C":"D_opt_a2" with lines lw 2 lc rgb "#08519c" title "approach 2 power law", \
     lines using "C":"D_opt_a3" with lines lw 2 dt 2 lc rgb "#d95f0e" title "approach 3 L(N, D)", \
     lines using "C":"D_opt_20" with lines lw 1 dt 3 lc rgb "#555555" title "D = 20 N"

# Contours in log10 coordinates: computed into a table, then drawn as lines with the runs. The
# table's columns are separated by spaces; the TSV cells hold no spaces, so whitespace reads both.
set datafile separator whitespace
x0 = log10(nlo + 0.0) - 0.3; x1 = log10(nhi + 0.0) + 0.3
y0 = log10(dlo + 0.0) - 0.3; y1 = log10(dhi + 0.0) + 0.3
unset logscale
set format x "%g"; set format y "%g"
set xrange [x0:x1]; set yrange [y0:y1]
set isosamples 80, 80
set samples 80, 80
set contour base
lv0 = ceil(Ev * 10) / 10.0 + 0.1
set cntrparam levels incremental lv0, 0.1, lv0 + 3
unset surface
set view map
set table $contours
splot law(10**x, 10**y)
unset table
unset contour
set title "approach 3: contours of L(N, D), the runs, the compute-optimal frontier"
set xlabel "log10 N"
set ylabel "log10 D (tokens)"
set key below left Left reverse vertical maxrows 3 samplen 3
plot $contours using 1:2 with lines lw 1 lc rgb "#9ecae1" title sprintf("L(N, D) every 0.1 nats from %.1f", lv0), \
     points using (log10(column("N"))):(log10(column("D"))):(column("budget_index") + 1) \
         with points pt 7 ps 1.1 lc variable title "runs (colour: budget)", \
     lines using (log10(column("N_opt_a3"))):(log10(column("D_opt_a3"))) with lines lw 2 \
         dt 2 lc rgb "#d95f0e" title "approach 3 N_opt, D_opt"
unset multiplot
