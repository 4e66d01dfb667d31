# The checker behind scripts/check_docs.sh (the marker format is described there).
# Variables: build (the build folder), slow (1: run the slow commands too), update (1: write
# DOC.new into tmp with the fresh numbers), tmp (a scratch folder).
# Each doc comes twice on the command line: pass 1 collects its `cmd` markers, pass 2 checks.
BEGIN {
    NUMRE = "-?[0-9]+([ ,][0-9][0-9][0-9])*(\\.[0-9]+)?([eE][-+]?[0-9]+)?"
    OUTRE = "-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?"
    ncache = 0; total_bad = 0; total_err = 0
}

FNR == 1 {
    if (doc != "" && FILENAME == doc && pass == 1) { pass = 2; start_doc() }
    else { if (doc != "") end_doc(); doc = FILENAME; pass = 1; delete kind; delete cmdtext; delete cmdfile }
    fenced = 0
}

pass == 1 {
    if ($0 ~ /^[ ]*```/) fenced = !fenced
    rest = $0
    while ((i = index(rest, "<!--")) > 0) {
        j = index(substr(rest, i + 4), "-->"); if (j == 0) break
        body = trim(substr(rest, i + 4, j - 1)); rest = substr(rest, i + 4 + j + 2)
        if (body ~ /^cmd [A-Za-z0-9_.-]+( (slow|figure) [^ :]+)?:/) define(body)
    }
    next
}

{   # pass 2: every marker on the line, each against the text between it and the one before.
    if ($0 ~ /^[ ]*```/) fenced = !fenced
    if (fenced && index($0, "<!--")) err(FNR, "a marker inside a code block shows when rendered: put it after the block")
    rest = $0; out = ""
    while ((i = index(rest, "<!--")) > 0) {
        j = index(substr(rest, i + 4), "-->"); if (j == 0) break
        before = substr(rest, 1, i - 1); comment = substr(rest, i, j + 6)
        body = trim(substr(rest, i + 4, j - 1)); rest = substr(rest, i + 4 + j + 2)
        if (body ~ /^=/ || (body ~ /^[A-Za-z0-9_.-]+:/ && body !~ /^cmd /))
            before = check(before, body)
        out = out before comment
    }
    if (update == 1) print out rest > (tmp "/" base(doc) ".new")
}

END {
    if (doc != "") end_doc()
    printf "check-docs: %d numbers checked: %d compared (%d with a recorded slow output), %d formulas, %d not compared (timing); %d differ, %d errors\n", \
        g_n, g_cmp, g_rec, g_form, g_time, total_bad, total_err
    exit (total_bad + total_err > 0) ? 1 : 0
}

function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function base(p) { sub(/.*\//, "", p); return p }

# `cmd NAME[ slow FILE| figure FILE]: COMMAND`
function define(body,    head, name, c, w, n) {
    c = index(body, ":"); head = substr(body, 5, c - 5); n = split(head, w, " ")
    name = w[1]; kind[name] = (n >= 2) ? w[2] : "quick"
    cmdtext[name] = trim(substr(body, c + 1))
    if (kind[name] != "quick") cmdfile[name] = w[3]
}

function start_doc() { n = cmp = rec = form = tim = bad = errs = 0 }
function end_doc() {
    if (pass != 2) return
    if (update == 1) close(tmp "/" base(doc) ".new")
    printf "%s: %d numbers: %d compared%s, %d formulas, %d not compared (timing)%s%s\n", doc, n, cmp, \
        (rec ? " (" rec " with a recorded slow output)" : ""), form, tim, \
        (bad ? ", " bad " DIFFER" : ""), (errs ? ", " errs " ERRORS" : "")
    g_n += n; g_cmp += cmp; g_rec += rec; g_form += form; g_time += tim
}

function err(line, msg) { printf "%s:%d: error: %s\n", doc, line, msg; errs++; total_err++ }

# The command with every word `build` or `build/...` pointing into the build folder.
function with_build(c,    w, k, m, s) {
    m = split(c, w, " "); s = ""
    for (k = 1; k <= m; k++) {
        if (w[k] == "build") w[k] = build
        else if (w[k] ~ /^build\//) w[k] = build substr(w[k], 6)
        else if (w[k] ~ /=build\//) sub(/=build\//, "=" build "/", w[k])
        s = s (k > 1 ? " " : "") w[k]
    }
    return s
}

function refresh(name,    c) {
    c = with_build(cmdtext[name])
    c = (c ~ /[;&|]/) ? "(export TAPEGRAD_KERNELS=portable; " c ")" : "TAPEGRAD_KERNELS=portable " c
    if (kind[name] == "figure") c = c "   (it writes " cmdfile[name] "; make BUILD=" build " figures runs it)"
    return c
}

# The output of NAME, run once per command (kept in tmp): returns its key, or "" on failure.
function output(name, line,    key, f, c, rc, l, k, w) {
    k = 0
    if (!(name in kind)) { err(line, "no command named " name " in this doc (<!-- cmd " name ": ... -->)"); return "" }
    if (kind[name] == "broken") return ""
    key = kind[name] " " cmdfile[name] " " with_build(cmdtext[name])
    if (key in outn) return outn[key] < 0 ? "" : key
    if (kind[name] == "quick" || (kind[name] == "slow" && slow == 1)) {
        f = tmp "/out" (++ncache)
        c = with_build(cmdtext[name])
        if (kind[name] == "quick" && cache != "") {
            # --cache DIR: a quick command's output is kept under the checksum of its text.
            print c > (tmp "/cmd"); close(tmp "/cmd")
            l = "cksum < " tmp "/cmd"; l | getline k; close(l)
            f = cache "/" (split(k, w, " ") ? w[1] : k) ".out"
            if ((getline l < f) > 0) { close(f); rc = 0 } else rc = system(c " > " f " 2> " f ".err")
            k = 0
        } else if (kind[name] == "quick") rc = system(c " > " f " 2> " f ".err")
        else { printf "running the slow command %s: %s\n", name, c; rc = system(c " > " f " 2> " f ".err") }
        if (rc != 0) {
            err(line, "the command " name " failed (exit " rc "): " refresh(name))
            if (cache != "") system("rm -f " f)
            while ((getline l < (f ".err")) > 0) if (++k <= 5) print "    " l
            close(f ".err"); outn[key] = -1; return ""
        }
        if (kind[name] == "slow") f = cmdfile[name]
    } else f = cmdfile[name]
    k = 0
    while ((getline l < f) > 0) outl[key, ++k] = l
    close(f)
    if (k == 0) {
        err(line, "no output from " name " (" f ")" (kind[name] == "quick" ? "" : ": run make figures")); outn[key] = -1; return ""
    }
    outn[key] = k; return key
}

# The value LOC picks in the output of KEY (sets found).
function locate(key, loc, line,    re, c, kk, want, l, m, f, h, col, row, t, s) {
    found = 0
    if (loc ~ /^\//) {                      # /REGEX/ K
        c = index(substr(loc, 2), "/"); re = substr(loc, 2, c - 1); kk = trim(substr(loc, c + 2)) + 0
        for (l = 1; l <= outn[key]; l++) if (outl[key, l] ~ re) break
        if (l > outn[key]) { err(line, "no output line matches /" re "/"); return 0 }
        s = outl[key, l]; t = 0
        while (match(s, OUTRE)) {
            want = substr(s, RSTART, RLENGTH)
            if (want ~ /^-/ && RSTART > 1 && substr(s, RSTART - 1, 1) ~ /[A-Za-z0-9_.]/) want = substr(want, 2)
            if (++t == kk) { found = 1; return want + 0 }
            s = substr(s, RSTART + RLENGTH)
        }
        err(line, "the line matching /" re "/ has " t " numbers, not " kk ": " outl[key, l]); return 0
    }
    c = 0; for (l = length(loc); l > 0; l--) if (substr(loc, l, 1) == ",") { c = l; break }
    if (c == 0) { err(line, "cannot read the place " loc " (ROW, COLUMN or /REGEX/ K)"); return 0 }
    row = trim(substr(loc, 1, c - 1)); want = trim(substr(loc, c + 1))
    for (h = 1; h <= outn[key]; h++) {
        m = split(outl[key, h], f, "\t"); col = 0
        for (t = 1; t <= m; t++) if (f[t] == want) { col = t; break }
        if (col) break
    }
    if (!col) { err(line, "no column headed " want " in the output"); return 0 }
    for (l = h + 1; l <= outn[key]; l++) {
        split(outl[key, l], f, "\t")
        if (f[1] == row) {
            if (f[col] !~ /^-?[0-9.]/) { err(line, "row " row ", column " want " holds '" f[col] "', not a number"); return 0 }
            gsub(/ /, "", f[col]); found = 1; return f[col] + 0
        }
    }
    err(line, "no row " row " under the header with " want); return 0
}

function formula(expr,    c, v) {
    c = "awk 'BEGIN { printf \"%.17g\\n\", (" expr ") }' 2>&1"
    v = ""; c | getline v; close(c); return v
}

# The text of the doc's number in the same style as D (decimals, exponent, grouping).
function like(d, v,    k, p, s, e, neg, ip, fp, g, sep) {
    k = 0; if ((p = index(d, ".")) > 0) { s = d; sub(/[eE].*/, "", s); k = length(s) - p }
    if (d ~ /[eE]/) {
        s = sprintf("%." k "e", v); e = s; sub(/.*e/, "", e); sub(/e.*/, "", s)
        return s "e" (e + 0)
    }
    s = sprintf("%." k "f", v)
    if (s ~ /^-0(\.0*)?$/) s = substr(s, 2)
    sep = index(d, ",") ? "," : " "
    if (index(d, sep) == 0) return s
    neg = (s ~ /^-/); if (neg) s = substr(s, 2)
    ip = s; fp = ""; if ((p = index(s, ".")) > 0) { ip = substr(s, 1, p - 1); fp = substr(s, p) }
    g = ""
    while (length(ip) > 3) { g = sep substr(ip, length(ip) - 2) g; ip = substr(ip, 1, length(ip) - 3) }
    return (neg ? "-" : "") ip g fp
}

# Checks the marker BODY against the number that ends TEXT; returns TEXT, with the fresh number
# in it if updating.
function check(text, body,    t, pos, off, len, d, s, c, name, loc, timing, scale, key, v, fresh, fs, w, m) {
    if (index(body, "--")) { err(FNR, "a marker inside a line may not hold -- (it would show on GitHub): " body); return text }
    t = text; sub(/[%x*]*$/, "", t)
    pos = 0; off = 0; s = t
    while (match(s, NUMRE)) { pos = off + RSTART; len = RLENGTH; off += RSTART + RLENGTH - 1; s = substr(s, RSTART + RLENGTH) }
    if (pos == 0 || pos + len - 1 != length(t)) { err(FNR, "the marker <!-- " body " --> does not follow a number"); return text }
    d = substr(t, pos, len)
    if (d ~ /^-/ && pos > 1 && substr(t, pos - 1, 1) ~ /[A-Za-z0-9_.]/) { d = substr(d, 2); pos++; len-- }
    n++
    if (body ~ /^=/) {
        form++; name = "formula"; v = expand(substr(body, 2)); if (v == "") return text
        v = formula(v)
        if (v !~ /^-?[0-9]/) { err(FNR, "the formula" substr(body, 2) " does not compute: " v); return text }
    } else {
        c = index(body, ":"); name = substr(body, 1, c - 1); loc = trim(substr(body, c + 1))
        timing = 0
        if (loc ~ /;[ ]*timing$/) { timing = 1; sub(/;[ ]*timing$/, "", loc); loc = trim(loc) }
        if (loc == "timing") { timing = 1; loc = "" }
        if (timing) { tim++; printf "%s:%d: not compared: timing %s (%s: %s)\n", doc, FNR, d, name, loc; return text }
        scale = ""; m = split(loc, w, " ")
        if (m > 1 && w[m] ~ /^[*\/][0-9.eE+-]+$/) { scale = w[m]; loc = trim(substr(loc, 1, length(loc) - length(scale))) }
        key = output(name, FNR); if (key == "") return text
        v = locate(key, loc, FNR); if (!found) return text
        if (scale ~ /^\*/) v *= substr(scale, 2) + 0
        if (scale ~ /^\//) v /= substr(scale, 2) + 0
        cmp++; if (kind[name] != "quick" && slow != 1) rec++
    }
    s = d; gsub(/[ ,]/, "", s)
    fresh = like(d, v)
    fs = fresh; gsub(/[ ,]/, "", fs)
    if (fs + 0 == s + 0 && (s ~ /[eE]/ || fs == s)) return text
    if (update == 1) {
        printf "%s:%d: %s -> %s\n", doc, FNR, d, fresh
        return substr(text, 1, pos - 1) fresh substr(text, pos + len)
    }
    bad++; total_bad++
    printf "%s:%d: the doc says %s, the command prints %s now  (%s)\n", doc, FNR, d, fresh, body
    if (name == "formula") printf "    the formula: %s\n", substr(body, 2)
    else printf "    refresh: %s\n", refresh(name)
    return text
}

# A formula with every NAME[ROW, COLUMN] or NAME[/REGEX/ K] replaced by that value, or "" when
# one cannot be found.
function expand(expr,    out, rest, e, b, name, loc, key, v) {
    out = ""
    while (match(expr, /[A-Za-z_][A-Za-z0-9_.-]*\[/)) {
        name = substr(expr, RSTART, RLENGTH - 1); out = out substr(expr, 1, RSTART - 1)
        rest = substr(expr, RSTART + RLENGTH)
        # a /REGEX/ may hold brackets of its own: the reference ends at the first ] after it
        b = (substr(rest, 1, 1) == "/") ? index(substr(rest, 2), "/") + 1 : 0
        e = index(substr(rest, b + 1), "]"); if (e == 0) { err(FNR, "no ] after " name "["); return "" }
        loc = substr(rest, 1, b + e - 1); expr = substr(rest, b + e + 1)
        key = output(name, FNR); if (key == "") return ""
        v = locate(key, trim(loc), FNR); if (!found) return ""
        out = out sprintf("%.17g", v)
    }
    return out expr
}
