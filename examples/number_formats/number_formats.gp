# The spacing between neighbouring values against their magnitude, for e4m3, e5m2, fp16 and
# bf16: each format is a staircase (constant spacing inside a binade, doubling at each power of
# two, flat through the subnormals). Top: the range where the small formats live; bottom:
# bf16's whole range, for scale. Reads the TSV of `number_formats --spacing`.
#   gnuplot -e "data='spacing.tsv'; out='number_formats.png'" number_formats.gp
# Optional: term='png' when pngcairo is missing.
if (!exists("data")) data = 'number_formats.tsv'
if (!exists("out")) out = 'number_formats.png'
if (!exists("term")) term = 'pngcairo'

set terminal term size 1100,1000 font ",12"
set output out
set datafile separator "\t"
set logscale xy 2
set format x "2^{%L}"
set format y "2^{%L}"
set mxtics 1
set mytics 1
set grid xtics ytics lc rgb "#dddddd"
set xlabel "magnitude |x|"
set ylabel "gap to the next representable value"

is(f) = strcol(1) eq f
fmts = "e4m3 e5m2 fp16 bf16"
colors = "#d62728 #ff7f0e #1f77b4 #2ca02c"
log2(v) = int(floor(log(v) / log(2) + 0.5))
minlabel(i) = sprintf("%s min subnormal 2^{%d}", word(fmts, i), log2($2))
maxlabel(i) = sprintf("%s max %.5g", word(fmts, i), $2)

# the staircases, then circles on the smallest subnormals and stars on the maxima, labelled
PLOT = 'plot for [i=1:4] data using 2:(is(word(fmts, i)) ? $3 : NaN) skip 1 \
           with lines lw 2 lc rgb word(colors, i) title word(fmts, i), \
       for [i=1:4] data using 2:(is(word(fmts, i)) && strcol(4) eq "min_subnormal" ? $3 : NaN) \
           skip 1 with points pt 6 ps 2 lc rgb word(colors, i) notitle, \
       for [i=1:4] data using 2:(is(word(fmts, i)) && strcol(4) eq "max" ? $3 : NaN) \
           skip 1 with points pt 3 ps 2.5 lc rgb word(colors, i) notitle, \
       for [i=1:4] data using 2:(is(word(fmts, i)) && strcol(4) eq "min_subnormal" ? $3 : NaN):\
           (minlabel(i)) skip 1 with labels right offset -1.5,0.6 font ",10" \
           tc rgb word(colors, i) notitle, \
       for [i=1:4] data using 2:(is(word(fmts, i)) && strcol(4) eq "max" ? $3 : NaN):\
           (maxlabel(i)) skip 1 with labels left offset 1.5,-0.6 font ",10" \
           tc rgb word(colors, i) notitle'

# bf16's whole range: only its own ends are labelled, inside the frame
PLOT_FULL = 'plot for [i=1:4] data using 2:(is(word(fmts, i)) ? $3 : NaN) skip 1 \
           with lines lw 2 lc rgb word(colors, i) notitle, \
       data using 2:(is("bf16") && strcol(4) ne "-" ? $3 : NaN) skip 1 \
           with points pt 6 ps 2 lc rgb word(colors, 4) notitle, \
       data using 2:(is("bf16") && strcol(4) eq "min_subnormal" ? $3 : NaN):(minlabel(4)) \
           skip 1 with labels left offset 1.5,0 font ",10" tc rgb word(colors, 4) notitle, \
       data using 2:(is("bf16") && strcol(4) eq "max" ? $3 : NaN):(maxlabel(4)) \
           skip 1 with labels right offset -1.5,0 font ",10" tc rgb word(colors, 4) notitle'

set multiplot
set size 1,0.64
set origin 0,0.36
set title "Representable values: spacing against magnitude (o smallest subnormal, * max)"
set key bottom right box opaque
set xrange [2**-30:2**22]
set yrange [2**-30:2**18]
set xtics 2**4
set ytics 2**4
@PLOT

set size 1,0.36
set origin 0,0
set title "the same, over bf16's whole range"
set key off
set xrange [2**-140:2**132]
set yrange [2**-140:2**128]
set xtics 2**32
set ytics 2**32
@PLOT_FULL
unset multiplot
