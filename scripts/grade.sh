#!/bin/sh
# Coursework: grades a student tree by the table tests/parts.tsv (docs/coursework.md).
#
#   sh scripts/grade.sh [--student DIR] [--timeout SECONDS] [--out FILE] [--work DIR]
#                       [--instructor DIR]
#
# The student tree is copied to the work directory (default build/grade/work); the graded tests
# (the hidden ones, visibility other than "visible", included), their headers and the Makefile
# are taken from the instructor tree; every test binary of the table is built
# (`make build/tests/NAME` in the copy) and run once under `timeout`. A row passes when its cmocka test reports OK (a row whose test is * needs the whole
# binary to exit 0); a binary that does not build, crashes, or runs out of time fails its rows
# that did not report OK, and the grader carries on. Writes a Gradescope results.json (default
# build/grade/results.json) and prints the table. Exit status 0 whenever grading finished.
set -u
instructor=$(cd "$(dirname "$0")/.." && pwd)
student=""; limit=300; out=""; work=""
die() { echo "grade: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --student) [ $# -ge 2 ] || die "--student needs a value"; student="$2"; shift 2 ;;
        --timeout) [ $# -ge 2 ] || die "--timeout needs a value"; limit="$2"; shift 2 ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift 2 ;;
        --work) [ $# -ge 2 ] || die "--work needs a value"; work="$2"; shift 2 ;;
        --instructor) [ $# -ge 2 ] || die "--instructor needs a value"; instructor="$2"; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
case "$limit" in ''|*[!0-9]*|0) die "--timeout '$limit' is not a positive whole number of seconds" ;; esac
instructor=$(cd "$instructor" 2>/dev/null && pwd) || die "no instructor tree"
table="$instructor/tests/parts.tsv"
[ -f "$table" ] || die "no table $table"
[ -n "$student" ] || student="$instructor/build/assignment"
[ -f "$student/Makefile" ] || die "'$student' is not a tree with a Makefile"
student=$(cd "$student" && pwd)
[ -n "$work" ] || work="$instructor/build/grade/work"
[ -n "$out" ] || out="$(dirname "$work")/results.json"
# The parent make's settings (SANITIZE=1, -j) must not leak into the copy's build.
unset MAKEFLAGS MFLAGS MAKELEVEL

# Rows: binary, test, part, points, visibility. Checked before anything runs.
rows=$(awk -F'\t' '/^#/ || /^[ \t]*$/ { next }
    NF != 5 || $4 !~ /^[0-9]+(\.[0-9]+)?$/ || $5 !~ /^(visible|hidden|after_due_date|after_published)$/ {
        printf "grade: %s:%d: want binary, test, part, points, visibility (tab-separated)\n",
               FILENAME, NR > "/dev/stderr"; bad = 1 }
    { print } END { exit bad }' "$table") || exit 2
binaries=$(printf '%s\n' "$rows" | cut -f1 | sort -u)
hidden=$(printf '%s\n' "$rows" | awk -F'\t' '$5 != "visible" { print $1 }' | sort -u)

if [ -e "$work" ]; then
    [ -f "$work/.tapegrad-grade" ] || die "'$work' exists and was not made by the grader"
    rm -rf "$work"
fi
mkdir -p "$work" "$(dirname "$out")" || die "cannot make $work"
work=$(cd "$work" && pwd)
# A fresh build: the student's build/ and build-san/ are not copied (objects made elsewhere carry
# that tree's TAPEGRAD_SOURCE_DIR).
(cd "$student" && tar cf - --exclude=./build --exclude=./build-san .) | (cd "$work" && tar xf -)
: > "$work/.tapegrad-grade"
# The tests are the instructor's: every graded test source the instructor tree holds (the hidden
# ones must be there), the tests' headers and fixtures, and the Makefile replace the student's
# copies, so that editing a test or the build flags changes no grade.
mkdir -p "$work/tests"
for b in $hidden; do
    [ -f "$instructor/tests/$b.c" ] || die "hidden test $b has no source $instructor/tests/$b.c"
done
for b in $binaries; do
    [ -f "$instructor/tests/$b.c" ] && cp "$instructor/tests/$b.c" "$work/tests/$b.c"
done
for f in "$instructor"/tests/*.h "$instructor"/Makefile; do
    [ -f "$f" ] && cp "$f" "$work/${f#"$instructor"/}"
done
[ -d "$instructor/tests/fixtures" ] && cp -R "$instructor/tests/fixtures" "$work/tests/"
res="$work/.grade"
mkdir -p "$res"

export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
for b in $binaries; do
    echo "grade: building and running $b" >&2
    if ! make -C "$work" -j"${GRADE_JOBS:-2}" "build/tests/$b" > "$res/$b.build" 2>&1; then
        echo build > "$res/$b.rc"
        continue
    fi
    case "$b" in
        test_dist_*) set -- sh "$work/scripts/mpirun" -np "${DIST_RANKS:-4}" "$work/build/tests/$b" ;;
        *) set -- "$work/build/tests/$b" ;;
    esac
    # Line-buffered stdout keeps a test's printed numbers in order with cmocka's messages.
    command -v stdbuf > /dev/null 2>&1 && set -- stdbuf -oL "$@"
    (cd "$work" && CMOCKA_MESSAGE_OUTPUT=stdout timeout -k 5 "$limit" "$@") > "$res/$b.out" 2>&1
    echo $? > "$res/$b.rc"
done

tmp="$out.tmp.$$"
printf '%s\n' "$rows" | awk -F'\t' -v res="$res" -v limit="$limit" -v json="$tmp" '
function esc(s) {
    gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); gsub(/\t/, "\\t", s); gsub(/\r/, "\\r", s)
    gsub(/\n/, "\\n", s); gsub(/[\001-\037]/, " ", s)
    return s
}
function slurp(file,   line, s, n) {
    s = ""; n = 0
    while ((getline line < file) > 0) { s = s line "\n"; n++ }
    close(file)
    return s
}
function tail_of(s, k,   a, n, i, t) {
    n = split(s, a, "\n"); t = ""
    for (i = (n - k > 1 ? n - k : 1); i <= n; i++) if (a[i] != "") t = t a[i] "\n"
    return t
}
# The lines cmocka printed for one test: from its RUN line to its OK or FAILED line.
function section(s, name,   a, n, i, on, t) {
    n = split(s, a, "\n"); t = ""; on = 0
    for (i = 1; i <= n; i++) {
        if (a[i] == "[ RUN      ] " name) on = 1
        if (on) t = t a[i] "\n"
        if (on && (a[i] == "[       OK ] " name || a[i] == "[  FAILED  ] " name)) break
    }
    return t
}
function why(rc, b) {
    if (rc == "build") return b " did not build; the end of the build log:\n" tail_of(slurp(res "/" b ".build"), 25)
    if (rc == 124 || rc == 137) return b " ran out of time (" limit " s) before this test reported\n"
    if (rc > 128) return b " crashed (signal " rc - 128 ") before this test reported\n"
    return b " exited with status " rc " before this test reported\n"
}
{
    b = $1; name = $2; part = $3; pts = $4 + 0; vis = $5
    if (!(b in rc)) {
        f = res "/" b ".rc"; r = ""
        if ((getline r < f) <= 0) r = "build"
        close(f); rc[b] = r
        output[b] = (r == "build") ? "" : slurp(res "/" b ".out")
    }
    r = rc[b]; o = output[b]
    if (name == "*") {
        ok = r == "0"
        text = ok ? "" : (r == "1" ? tail_of(o, 40) : why(r, b) tail_of(o, 40))
    } else {
        ok = index("\n" o, "\n[       OK ] " name "\n") > 0
        sec = section(o, name)
        text = ok ? sec : (sec ~ /\[  FAILED  \]/ ? sec : why(r, b) sec)
    }
    score = ok ? pts : 0
    total += score; max += pts; n++
    label = part ": " b (name == "*" ? "" : " " name)
    entries[n] = sprintf("    {\"name\": \"%s\", \"score\": %s, \"max_score\": %s, \"visibility\": \"%s\", \"tags\": [\"%s\"], \"output\": \"%s\"}",
                         esc(label), score, pts, vis, esc(part), esc(text))
    printf "%-24s %-52s %5s / %-5s %s%s\n", part, b (name == "*" ? "" : " " name), score, pts,
           (ok ? "pass" : "FAIL"), (vis == "visible" ? "" : " (" vis ")")
    if (!(part in pscore)) order[++np] = part
    pscore[part] += score; pmax[part] += pts
}
END {
    printf "{\n  \"score\": %s,\n  \"max_score\": %s,\n  \"tests\": [\n", total, max > json
    for (i = 1; i <= n; i++) printf "%s%s\n", entries[i], (i < n ? "," : "") > json
    printf "  ]\n}\n" > json
    print ""
    for (i = 1; i <= np; i++) printf "%-24s %5s / %s\n", order[i], pscore[order[i]], pmax[order[i]]
    printf "%-24s %5s / %s\n", "total", total, max
}' || die "could not write the results"
mv "$tmp" "$out"
echo "grade: wrote $out"
