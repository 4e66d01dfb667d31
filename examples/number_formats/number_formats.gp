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
# Each format's ends go into its key entry rather than beside its marker: beside the markers
# they crossed the other staircases and the frame.
array ends[4]
do for [i=1:4] {
    f = word(fmts, i)
    stats data using (is(f) && strcol(4) eq "max" ? $2 : NaN) skip 1 nooutput
    mx = STATS_max
    stats data using (is(f) && strcol(4) eq "min_subnormal" ? $2 : NaN) skip 1 nooutput
    ends[i] = sprintf("%s: largest %.5g, smallest subnormal 2^{%d}", f, mx, log2(STATS_min))
    if (i == 4) { bf16_max = mx; bf16_min = log2(STATS_min) }
}

# the staircases, then circles on the smallest subnormals and stars on the maxima (two black
# key entries say which is which)
PLOT = 'plot for [i=1:4] data using 2:(is(word(fmts, i)) ? $3 : NaN) skip 1 \
           with lines lw 2 lc rgb word(colors, i) title ends[i], \
       for [i=1:4] data using 2:(is(word(fmts, i)) && strcol(4) eq "min_subnormal" ? $3 : NaN) \
           skip 1 with points pt 6 ps 2 lc rgb word(colors, i) notitle, \
       for [i=1:4] data using 2:(is(word(fmts, i)) && strcol(4) eq "max" ? $3 : NaN) \
           skip 1 with points pt 3 ps 2.5 lc rgb word(colors, i) notitle, \
       NaN with points pt 6 ps 2 lc rgb "black" title "smallest subnormal", \
       NaN with points pt 3 ps 2.5 lc rgb "black" title "largest finite value"'

# bf16's whole range: its ends marked, and named in the title
PLOT_FULL = 'plot for [i=1:4] data using 2:(is(word(fmts, i)) ? $3 : NaN) skip 1 \
           with lines lw 2 lc rgb word(colors, i) notitle, \
       data using 2:(is("bf16") && strcol(4) eq "min_subnormal" ? $3 : NaN) skip 1 \
           with points pt 6 ps 2 lc rgb word(colors, 4) notitle, \
       data using 2:(is("bf16") && strcol(4) eq "max" ? $3 : NaN) skip 1 \
           with points pt 3 ps 2.5 lc rgb word(colors, 4) notitle'

set multiplot
set size 1,0.64
set origin 0,0.36
set title "Representable values: the gap to the next one against magnitude" font ",14"
set key top left box opaque Left reverse samplen 2 spacing 1.1 font ",11"
set xrange [2**-30:2**22]
set yrange [2**-30:2**18]
set xtics 2**4
set ytics 2**4
@PLOT

set size 1,0.36
set origin 0,0
set title sprintf("the same over bf16's whole range, from 2^{%d} (smallest subnormal) to %.4g (largest)", \
                  bf16_min, bf16_max) font ",12"
set key off
set xrange [2**-140:2**132]
set yrange [2**-140:2**128]
set xtics 2**32
set ytics 2**32
@PLOT_FULL
unset multiplot
