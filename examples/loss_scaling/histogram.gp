# The mixed-precision paper's figure 3 on our model: activation gradients of one batch in log2
# bins (bin e holds 2^e <= |g| < 2^(e+1)), fp16's range marked, and the same gradients after a
# loss scale of 2^k as an outline. Reads loss_scaling_hist.tsv and loss_scaling_underflow.tsv,
# written by loss_scaling.
#   gnuplot -e "input='loss_scaling_hist.tsv'; underflow='loss_scaling_underflow.tsv'; \
#               output='loss_scaling_hist.png'" histogram.gp
# Optional: term='png' when pngcairo is missing.
if (!exists("input")) input = 'loss_scaling_hist.tsv'
if (!exists("underflow")) underflow = 'loss_scaling_underflow.tsv'
if (!exists("output")) output = 'loss_scaling_hist.png'
if (!exists("term")) term = 'pngcairo'

set terminal term size 1300,700 font ",11" noenhanced
set output output
set datafile separator "\t"
set datafile missing "nan"

stats input using "log2_bin" nooutput
lo = STATS_min
hi = STATS_max
stats input using "log2_scale" nooutput
k = int(STATS_max)
stats input using (strcol("kind") eq "zero" ? column("fraction") : NaN) nooutput
zero_share = STATS_max
# Row 1 of the underflow table is the unscaled case, row 3 the scale of the outline.
stats underflow using "rounded_fraction" every ::0::0 nooutput
lost_unscaled = STATS_max
stats underflow using "rounded_fraction" every ::2::2 nooutput
lost_scaled = STATS_max

zero_x = lo - 4
mark_max = log(65504) / log(2)
set xrange [zero_x - 2 : (hi > mark_max ? hi : mark_max) + 3]
set xtics add ("0" zero_x + 0.5)
set logscale y
set yrange [0.8 : *]
set format y "10^{%T}"
set terminal term enhanced
set xlabel "log2 |gradient|   (exact zeros: the bar on the left)"
set ylabel "values"
set grid ytics lc rgb "#e0e0e0"
set key below horizontal maxrows 2 width 2
set bmargin 7
set title "activation gradients of one batch, the default model part-way through fp32 " . \
    "training\n" . \
    sprintf("fp16 turns %.2f%% of the nonzero ones into 0; %.3f%% after a loss scale of 2^{%d}", \
            100 * lost_unscaled, 100 * lost_scaled, k)

# fp16: below 2^-25 a value rounds to 0 (2^-25 itself is a tie and goes to the even 0).
set object 1 rectangle from first zero_x + 2, graph 0 to first -25, graph 1 behind \
    fc rgb "#fbe3e3" fs solid noborder
set label 1 "becomes 0 in fp16" at first -26, graph 0.93 right front tc rgb "#b02020"
set arrow 1 from -24, graph 0 to -24, graph 1 nohead front lc rgb "#b02020" dt 2 lw 1.5
set arrow 2 from -14, graph 0 to -14, graph 1 nohead front lc rgb "#d08000" dt 2 lw 1.5
set arrow 3 from mark_max, graph 0 to mark_max, graph 1 nohead front lc rgb "#2060b0" dt 2 lw 1.5

set style fill solid 0.75 border rgb "#404040"
set boxwidth 1
bin_x(kind) = strcol("kind") eq kind ? column("log2_bin") + 0.5 : NaN
positive(col) = column(col) > 0 ? column(col) : NaN
plot input using (bin_x("bin")):(positive("count")) \
         with boxes lc rgb "#4a7ab8" title "fp32 gradients", \
     input using (strcol("kind") eq "zero" ? zero_x + 0.5 : NaN):"count" \
         with boxes lc rgb "#909090" \
         title sprintf("exactly 0 (%.1f%% of all values)", 100 * zero_share), \
     input using (bin_x("bin")):(positive("count_scaled")) \
         with histeps lw 2 lc rgb "#e07020" title sprintf("the same, loss scaled by 2^{%d}", k), \
     NaN with lines dt 2 lw 1.5 lc rgb "#b02020" title "fp16 smallest subnormal 2^{-24}", \
     NaN with lines dt 2 lw 1.5 lc rgb "#d08000" title "fp16 smallest normal 2^{-14}", \
     NaN with lines dt 2 lw 1.5 lc rgb "#2060b0" title "fp16 largest, 65504"
