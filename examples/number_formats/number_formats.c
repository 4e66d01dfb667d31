/* number_formats: look inside the emulated number formats of precision/.
 *
 *   number_formats --table                      every format's fields, range and precision
 *   number_formats --layout 0.1                 the bits of a value in every format
 *   number_formats --convert e4m3 --round rtz   fp32 values on stdin -> bits -> values
 *   number_formats --quantize nf4 --block 64    numbers on stdin -> codes, constants, error
 *   number_formats --spacing                    gap between neighbours against magnitude (the
 *                                               data behind the figure)
 * Tables are TSV with a header line. */
#include "cli/settings.h"
#include "examples/common/cli.h"
#include "precision/format.h"
#include "precision/quant.h"

#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { ACT_NONE, ACT_TABLE, ACT_LAYOUT, ACT_CONVERT, ACT_QUANTIZE, ACT_SPACING } Action;

typedef struct {
    Action      action;
    const char *layout_value;
    Format      format;
    QuantConfig quant;
    Rounding    rounding;
    long        seed;           /* --seed and --block, copied into rounding and quant */
    int         block;
} Options;

enum { FLAG_TABLE = 256, FLAG_LAYOUT, FLAG_CONVERT, FLAG_QUANTIZE, FLAG_SPACING, FLAG_ROUND,
       FLAG_SATURATE, FLAG_SEED, FLAG_BLOCK, FLAG_ASYMMETRIC, FLAG_DOUBLE_QUANT };

/* The names cli_choice() accepts, in enum order, taken from the library (fill_names). */
static const char *format_names[FMT_COUNT + 1];
static const char *round_names[FMT_ROUND_COUNT + 1];
static const char *kind_names[QUANT_KIND_COUNT + 1];

static void fill_names(void)
{
    for (int f = 0; f < FMT_COUNT; f++)
        format_names[f] = fmt_name(f);
    for (int m = 0; m < FMT_ROUND_COUNT; m++)
        round_names[m] = fmt_round_name(m);
    for (int k = 0; k < QUANT_KIND_COUNT; k++)
        kind_names[k] = quant_kind_name(k);
}

/* An action flag (a custom setting: --table and --spacing take no value); one per run. */
static void set_action(void *opts, int id, const char *flag, const char *arg)
{
    Options *o = opts;
    if (o->action != ACT_NONE)
        cli_usage_error("give exactly one of --table, --layout, --convert, --quantize, "
                        "--spacing");
    switch (id) {
    case FLAG_TABLE: o->action = ACT_TABLE; break;
    case FLAG_SPACING: o->action = ACT_SPACING; break;
    case FLAG_LAYOUT: o->action = ACT_LAYOUT; o->layout_value = arg; break;
    case FLAG_CONVERT:
        o->action = ACT_CONVERT;
        o->format = (Format)cli_choice(flag, arg, format_names);
        break;
    case FLAG_QUANTIZE:
        o->action = ACT_QUANTIZE;
        o->quant.kind = (QuantKind)cli_choice(flag, arg, kind_names);
        break;
    }
}

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .heading = "Actions (exactly one):" },
    { .name = "table", .id = FLAG_TABLE, .type = SETTING_CUSTOM, .set = set_action,
      .help = "sign/exponent/mantissa bits, bias, max, min normal, min\n"
              "subnormal, epsilon, inf and NaN of every format (TSV)" },
    { .name = "layout", .id = FLAG_LAYOUT, .type = SETTING_CUSTOM, .set = set_action,
      .arg = "VALUE", .help = "VALUE's bit fields in every format and the value stored" },
    { .name = "convert", .id = FLAG_CONVERT, .type = SETTING_CUSTOM, .set = set_action,
      .arg = "FORMAT",
      .help = "read one fp32 value per line on stdin (decimal, or 0x and\n"
              "8 hex digits: an exact bit pattern); print\n"
              "0xINPUT<TAB>0xENCODED<TAB>0xDECODED per line" },
    { .name = "quantize", .id = FLAG_QUANTIZE, .type = SETTING_CUSTOM, .set = set_action,
      .arg = "KIND",
      .help = "KIND int8, int4 or nf4: quantize the numbers read from\n"
              "standard input (spaces, commas or newlines between them;\n"
              "Ctrl-D ends them at a terminal); print the codes, block\n"
              "constants, dequantized values and the error" },
    { .name = "spacing", .id = FLAG_SPACING, .type = SETTING_CUSTOM, .set = set_action,
      .help = "gap to the next value against magnitude, e4m3 e5m2 fp16\n"
              "bf16 (TSV; figure.sh plots it)" },
    { .heading = "\nOptions:" },
    { .name = "round", .id = FLAG_ROUND, .type = SETTING_CHOICE, .offset = FIELD(rounding.mode),
      .choices = round_names, .def = "rne", .arg = "MODE",
      .help = "rne, rna, rtz, rup, rdown, stochastic" },
    { .name = "saturate", .id = FLAG_SATURATE, .type = SETTING_SWITCH,
      .offset = FIELD(rounding.saturate), .help = "overflow and infinities give +-max" },
    { .name = "seed", .id = FLAG_SEED, .type = SETTING_LONG, .offset = FIELD(seed),
      .lo = 0, .hi = 0x7fffffffL, .def = "0", .arg = "N",
      .help = "seed of stochastic rounding; line i uses index i" },
    { .name = "block", .id = FLAG_BLOCK, .type = SETTING_INT, .offset = FIELD(block),
      .lo = 1, .hi = 1 << 30, .arg = "N",
      .help = "values per block of constants (default: one per tensor)" },
    { .name = "asymmetric", .id = FLAG_ASYMMETRIC, .type = SETTING_SWITCH,
      .offset = FIELD(quant.asymmetric),
      .help = "int8/int4 with scale and zero point instead of absmax" },
    { .name = "double-quant", .id = FLAG_DOUBLE_QUANT, .type = SETTING_SWITCH,
      .offset = FIELD(quant.double_quant),
      .help = "quantize the block scales to e4m3 in blocks of 256" },
    { .heading = "  -h, --help          this help" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: %s ACTION [OPTIONS]\n"
           "Emulated number formats (fp32 tf32 bf16 fp16 e4m3 e5m2 e2m1) and quantization.\n"
           "\n", cli_program());
    settings_usage(SETTINGS, N_SETTINGS);
    printf("\nExamples: printf '0.1\\n0x7f800000\\n500\\n' | %s --convert e4m3 --saturate\n"
           "          echo 0.5 -1.25 3 100 | %s --quantize int8 --block 2\n",
           cli_program(), cli_program());
}

static Options parse_args(int argc, char **argv)
{
    Options o = {0};
    fill_names();
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_TABLE, usage, argc, argv);
    o.rounding.seed = (uint64_t)o.seed;
    o.quant.block = (size_t)o.block;
    if (o.action == ACT_NONE)
        cli_usage_error("give one of --table, --layout, --convert, --quantize, --spacing");
    if (o.action == ACT_QUANTIZE && o.quant.kind == QUANT_NF4 && o.quant.asymmetric)
        cli_usage_error("--asymmetric applies to int8 and int4, not nf4");
    return o;
}

/* ---- reading numbers ------------------------------------------------------------------- */

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* A decimal number (strtof: correctly rounded, "inf" and "nan" allowed) or 0x and exactly 8
 * hex digits, an fp32 bit pattern. Returns false for anything else. */
static bool parse_value(const char *s, float *out)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t len = strlen(s);
    while (len > 0 && isspace((unsigned char)s[len - 1]))
        len--;
    if (len == 0 || len > 64)
        return false;
    char buf[65];
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')) {
        if (len != 10 || strspn(buf + 2, "0123456789abcdefABCDEF") != 8)
            return false;
        *out = float_of((uint32_t)strtoul(buf + 2, NULL, 16));
        return true;
    }
    char *end;
    *out = strtof(buf, &end);       /* overflow gives inf and underflow 0 or a subnormal:
                                       the correctly rounded fp32, so ERANGE is not an error */
    return end != buf && *end == '\0';
}

static const char *const bad_value =
    "is not a decimal number or a 0x-prefixed 8-digit hex bit pattern";

/* ---- --table, --layout, --convert ---------------------------------------------------- */

static void print_table(void)
{
    printf("format\tsign\texponent\tmantissa\tbias\tmax_finite\tmin_normal\tmin_subnormal"
           "\tepsilon\tinf\tnan\tbits_per_element\n");
    for (int f = 0; f < FMT_COUNT; f++) {
        const FormatInfo *fi = fmt_info(f);
        printf("%s\t%d\t%d\t%d\t%d\t%.9g\t%.9g\t%.9g\t%.9g\t%s\t%s\t%d\n", fi->name,
               fi->sign_bits, fi->exponent_bits, fi->mantissa_bits, fi->bias, fi->max_finite,
               fi->min_normal, fi->min_subnormal, fi->epsilon, fi->has_inf ? "yes" : "no",
               fi->has_nan ? "yes" : "no", fi->bits_per_element);
    }
}

static void print_bits(uint32_t v, int from, int count)
{
    for (int i = from + count - 1; i >= from; i--)
        putchar((v >> i) & 1 ? '1' : '0');
}

/* Hex digits of a format's code in the --convert output: its container width. */
static int hex_digits(Format f)
{
    int bits = fmt_info(f)->bits_per_element;
    return bits <= 8 ? 2 : bits / 4;
}

static void print_layout(const char *text, Rounding r)
{
    float x;
    if (!parse_value(text, &x))
        cli_usage_error("--layout: '%s' %s", text, bad_value);
    printf("format\tsign\texponent\tmantissa\thex\tstored\trelative_error\n");
    for (int f = 0; f < FMT_COUNT; f++) {
        const FormatInfo *fi = fmt_info(f);
        uint32_t code = fmt_encode(f, x, r, 0);
        float stored = fmt_decode(f, code);
        /* tf32 sits in the top 19 bits of its fp32 container */
        int low = f == FMT_TF32 ? 13 : 0, m = fi->mantissa_bits, e = fi->exponent_bits;
        printf("%s\t", fi->name);
        print_bits(code, low + m + e, 1);
        putchar('\t');
        print_bits(code, low + m, e);
        putchar('\t');
        print_bits(code, low, m);
        printf("\t0x%0*x\t%.9g\t", hex_digits(f), code, stored);
        if (x != 0.0f && isfinite(x) && isfinite(stored))
            printf("%.3g\n", ((double)stored - x) / x);
        else
            printf("%s\n", stored == x ? "0" : "-");
    }
}

static void convert_lines(Format f, Rounding r)
{
    char *line = NULL;
    size_t cap = 0;
    uint64_t lineno = 0;
    while (getline(&line, &cap, stdin) != -1) {
        lineno++;
        float x;
        if (!parse_value(line, &x)) {
            line[strcspn(line, "\r\n")] = '\0';
            cli_die(1, "line %llu: '%s' %s", (unsigned long long)lineno, line, bad_value);
        }
        uint32_t code = fmt_encode(f, x, r, lineno - 1);
        printf("0x%08x\t0x%0*x\t0x%08x\n", bits_of(x), hex_digits(f), code,
               bits_of(fmt_decode(f, code)));
    }
    free(line);
}

/* ---- --spacing ------------------------------------------------------------------------- */

/* The first and last value of every run of equal spacing: enough to draw the staircase.
 * mark names the smallest subnormal and the largest finite value. */
static void print_spacing_of(Format f)
{
    const FormatInfo *fi = fmt_info(f);
    size_t n = 0;
    float *v = malloc(((size_t)1 << fi->bits) * sizeof *v);
    for (uint32_t code = 1; n == 0 || v[n - 1] < fi->max_finite; code++)
        v[n++] = fmt_decode(f, code);       /* positive codes ascend with their values */
    for (size_t i = 0; i < n; i++) {
        /* the gap above max is not a gap to a value: show max with the gap below it */
        double gap = i + 1 < n ? (double)v[i + 1] - v[i] : (double)v[i] - v[i - 1];
        double gap_before = i > 0 ? (double)v[i] - v[i - 1] : -1.0;
        double gap_after = i + 2 < n ? (double)v[i + 2] - v[i + 1] : gap;
        if (gap != gap_before || gap != gap_after || i + 1 == n)
            printf("%s\t%.9g\t%.9g\t%s\n", fi->name, v[i], gap,
                   i == 0 ? "min_subnormal" : i + 1 == n ? "max" : "-");
    }
    free(v);
}

static void print_spacing(void)
{
    printf("format\tvalue\tspacing\tmark\n");
    print_spacing_of(FMT_E4M3);
    print_spacing_of(FMT_E5M2);
    print_spacing_of(FMT_FP16);
    print_spacing_of(FMT_BF16);
}

/* ---- --quantize ------------------------------------------------------------------------ */

static float *read_numbers(size_t *n)
{
    /* Started from a terminal with nothing piped in, the program would wait in silence. */
    if (isatty(fileno(stdin)))
        fprintf(stderr, "%s: reading the numbers to quantize from standard input "
                "(Ctrl-D ends them)\n", cli_program());
    size_t cap = 1024, count = 0;
    float *x = malloc(cap * sizeof *x);
    char *line = NULL;
    size_t line_cap = 0;
    uint64_t lineno = 0;
    while (getline(&line, &line_cap, stdin) != -1) {
        lineno++;
        for (char *tok = strtok(line, " \t\r\n,"); tok; tok = strtok(NULL, " \t\r\n,")) {
            float v;
            if (!parse_value(tok, &v) || !isfinite(v))
                cli_die(1, "line %llu: '%s' is not a finite number", (unsigned long long)lineno,
                        tok);
            if (count == cap)
                x = realloc(x, (cap *= 2) * sizeof *x);
            x[count++] = v;
        }
    }
    free(line);
    if (count == 0)
        cli_die(1, "no numbers on standard input");
    *n = count;
    return x;
}

static void quantize_numbers(QuantConfig cfg)
{
    size_t n;
    float *x = read_numbers(&n);
    float *y = malloc(n * sizeof *y);
    QuantTensor *q = quant_new(cfg, n);
    if (!q || !y)
        cli_die(1, "out of memory for %zu values", n);
    quant_quantize(q, x);
    quant_dequantize(q, y);

    printf("index\tvalue\tcode\tdequantized\terror\n");
    for (size_t i = 0; i < n; i++)
        printf("%zu\t%.9g\t%d\t%.9g\t%.3g\n", i, x[i], quant_code_at(q, i), y[i],
               (double)y[i] - x[i]);
    printf("\nblock\tfirst\tscale\tzero_point\n");
    for (size_t b = 0; b < q->nblocks; b++)
        printf("%zu\t%zu\t%.9g\t%d\n", b, b * q->cfg.block, quant_block_scale(q, b),
               quant_block_zero(q, b));
    if (cfg.double_quant) {
        printf("\ndq_block\tconstant\tscale_mean\n");
        for (size_t d = 0; d < q->ndq; d++)
            printf("%zu\t%.9g\t%.9g\n", d, q->dq_scales[d], *q->scale_mean);
    }
    QuantError e = quant_error(x, y, n);
    printf("\nkind\tvalues\tblock\tmax_abs\trms\tsqnr_db\tbits_per_param\tbytes\n");
    printf("%s\t%zu\t%zu\t%.6g\t%.6g\t%.4g\t%.4f\t%zu\n", quant_kind_name(cfg.kind), n,
           q->cfg.block, e.max_abs, e.rms, e.sqnr_db, 8.0 * (double)quant_bytes(cfg, n) / n,
           quant_bytes(cfg, n));
    quant_free(q);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse_args(argc, argv);
    switch (o.action) {
    case ACT_TABLE: print_table(); break;
    case ACT_LAYOUT: print_layout(o.layout_value, o.rounding); break;
    case ACT_CONVERT: convert_lines(o.format, o.rounding); break;
    case ACT_QUANTIZE: quantize_numbers(o.quant); break;
    case ACT_SPACING: print_spacing(); break;
    default: break;
    }
    return 0;
}
