#!/bin/sh
# Coursework: grades a submission by the table tests/parts.tsv (docs/coursework.md).
#
#   sh scripts/grade.sh [--student DIR] [--parts a,b] [--timeout SECONDS] [--out FILE]
#                       [--work DIR] [--instructor DIR] [--no-sandbox]
#
# Only the submission's solution regions are used (the lines between YOUR CODE HERE and END OF
# YOUR CODE, per part and file); nothing else of its tree is built or read. For each part of the
# table, the instructor's tree is built with that part's regions alone taken from the
# submission, in a bubblewrap sandbox (no network, only the tree being built writable); the
# graded tests are the instructor's, built into that tree. Every row then runs alone (cmocka's
# test filter) in a fresh sandbox that sees the binary, the tests' data files and /usr, but no
# source; it passes only if it exits 0 and writes this run's random token to a result file that
# the grader opened outside the sandbox (tests/grade_runner.c). A hang, crash or exit costs that
# row, a broken region costs its part. Writes a Gradescope results.json (default
# build/grade/results.json) and prints the table. Exit status 0 whenever grading finished.
#
# --parts grades the rows of those parts only (default: every part of the table).
# --no-sandbox runs without bubblewrap (where it cannot run): the per-part builds and the token
# still hold, the file-system and network isolation do not; results.json says so.
set -u
grader=$(cd "$(dirname "$0")/.." && pwd)
instructor="$grader"
student=""; limit=300; out=""; work=""; parts=""; sandbox=1
die() { echo "grade: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --student) [ $# -ge 2 ] || die "--student needs a value"; student="$2"; shift 2 ;;
        --timeout) [ $# -ge 2 ] || die "--timeout needs a value"; limit="$2"; shift 2 ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift 2 ;;
        --work) [ $# -ge 2 ] || die "--work needs a value"; work="$2"; shift 2 ;;
        --instructor) [ $# -ge 2 ] || die "--instructor needs a value"; instructor="$2"; shift 2 ;;
        --parts) [ $# -ge 2 ] || die "--parts needs a value"; parts="$2"; shift 2 ;;
        --no-sandbox) sandbox=0; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
case "$limit" in ''|*[!0-9]*|0) die "--timeout '$limit' is not a positive whole number of seconds" ;; esac
instructor=$(cd "$instructor" 2>/dev/null && pwd) || die "no instructor tree"
table="$instructor/tests/parts.tsv"
[ -f "$table" ] || die "no table $table"
[ -n "$student" ] || student="$instructor/build/assignment"
[ -d "$student" ] || die "no submission directory '$student'"
student=$(cd "$student" && pwd)
[ -n "$work" ] || work="$instructor/build/grade/work"
[ -n "$out" ] || out="$(dirname "$work")/results.json"
runner_src="$grader/tests/grade_runner.c"
[ -f "$runner_src" ] || die "no $runner_src"
if [ "$sandbox" = 1 ]; then
    command -v bwrap > /dev/null 2>&1 ||
        die "bubblewrap is missing: 'sh scripts/deps.sh grade' installs it (or --no-sandbox)"
    bwrap --ro-bind / / --unshare-all --unshare-user --cap-drop ALL true 2> /dev/null ||
        die "bwrap cannot make a sandbox here (no user namespaces?): see docs/coursework.md, or --no-sandbox"
fi
# The parent make's settings (SANITIZE=1, -j) must not leak into the builds.
unset MAKEFLAGS MFLAGS MAKELEVEL

# Rows: binary, test, part, points, visibility. Checked before anything runs.
rows=$(awk -F'\t' -v want=",$parts," '/^#/ || /^[ \t]*$/ { next }
    NF != 5 || $4 !~ /^[0-9]+(\.[0-9]+)?$/ || $5 !~ /^(visible|hidden|after_due_date|after_published)$/ ||
    $1 !~ /^[A-Za-z0-9_]+$/ || $2 !~ /^([A-Za-z0-9_]+|\*)$/ || $3 !~ /^[A-Za-z0-9_]+$/ {
        printf "grade: %s:%d: want binary, test, part, points, visibility (tab-separated)\n",
               FILENAME, NR > "/dev/stderr"; bad = 1 }
    want == ",," || index(want, "," $3 ",") { print } END { exit bad }' "$table") || exit 2
for p in $(echo "$parts" | tr ',' ' '); do
    awk -F'\t' -v p="$p" '!/^#/ && $3 == p { found = 1 } END { exit !found }' "$table" ||
        die "--parts: no row of $table grades part '$p'"
done
[ -n "$rows" ] || die "no row of $table grades the parts '$parts'"
all_parts=$(printf '%s\n' "$rows" | awk -F'\t' '!seen[$3]++ { print $3 }')
binaries=$(printf '%s\n' "$rows" | cut -f1 | sort -u)

if [ -e "$work" ]; then
    [ -f "$work/.tapegrad-grade" ] || die "'$work' exists and was not made by the grader"
    rm -rf "$work"
fi
mkdir -p "$work" "$(dirname "$out")" || die "cannot make $work"
work=$(cd "$work" && pwd)
: > "$work/.tapegrad-grade"
tree="$work/tree"      # the tree being built or run: always this path (objects name it)
res="$work/results"    # verdicts, logs, tokens: never inside a sandbox
mkdir -p "$res"

# A marker line of either tree: the instructor's BEGIN/END SOLUTION, the student's YOUR CODE
# HERE / END OF YOUR CODE. The STUDENT block of a solution region is not code.
MARKS='
function is_begin(s, p) { return s ~ ("^[ \t]*/\\* (BEGIN SOLUTION " p "|YOUR CODE HERE \\(part " p "\\)) \\*/[ \t]*$") }
function is_end(s, p)   { return s ~ ("^[ \t]*/\\* (END SOLUTION " p "|END OF YOUR CODE \\(part " p "\\)) \\*/[ \t]*$") }
function any_mark(s)    { return s ~ /(BEGIN SOLUTION|END SOLUTION|YOUR CODE HERE|END OF YOUR CODE)/ }
'
# The bodies of part p's regions in one file, each followed by a line "\001".
EXTRACT_AWK="$MARKS"'
!on && is_begin($0, p) { on = 1; stud = 0; next }
on && is_end($0, p) { on = 0; print "\001"; next }
on && !stud && $0 ~ /^[ \t]*\/\* STUDENT[ \t]*$/ { stud = 1; next }
on && stud { if ($0 ~ /^[ \t]*\*\/[ \t]*$/) stud = 0; next }
on { print }
END { if (on) print "\001" }'
# Part p's regions of a base file, replaced in order by the bodies in file `bodies`.
COMPOSE_AWK="$MARKS"'
!on && is_begin($0, p) {
    print; on = 1
    while ((getline line < bodies) > 0 && line != "\001") print line
    next
}
on && is_end($0, p) { on = 0; print; next }
on { next }
{ print }'
# What a region may hold: statements inside the function it sits in. No preprocessor line but
# #pragma omp / #pragma GCC ivdep|unroll, no asm (.incbin reads files at build time), no
# attributes (a constructor runs before the tests), no braces that close the function, no
# trigraph, digraph or line splice that would hide any of these. One message per broken rule.
RULES_AWK='
function bad(msg) { if (!(msg in said)) printf "%s:%d: %s\n", file, lno, msg; said[msg] = 1; n++ }
$0 == "\001" { if (st != 0) bad("a comment, string or character constant is not closed");
               if (depth != 0) bad("the braces do not balance"); depth = 0; st = 0; lno = 0; next }
{
    lno++; raw = $0
    if (raw ~ /\\$/) bad("a line ends with a backslash (line splice)")
    if (raw ~ /\?\?[=\/\047()!<>-]/) bad("a trigraph")
    if (any_mark(raw)) bad("a marker line inside the region")
    code = ""
    if (st == 2) st = 0
    for (i = 1; i <= length(raw); i++) {
        c = substr(raw, i, 1); c2 = substr(raw, i, 2)
        if (st == 0) {
            if (c2 == "/*") { st = 1; i++; code = code " "; continue }
            if (c2 == "//") { st = 2; break }
            if (c == "\"") { st = 3; code = code "\"\""; continue }
            if (c == "\047") { st = 4; code = code "\047\047"; continue }
            code = code c
        } else if (st == 1) {
            if (c2 == "*/") { st = 0; i++ }
        } else if (st == 3 || st == 4) {
            if (c == "\\") { i++; continue }
            if ((st == 3 && c == "\"") || (st == 4 && c == "\047")) st = 0
        }
    }
    if (code ~ /^[ \t]*#/) {
        if (code !~ /^[ \t]*#[ \t]*pragma[ \t]+(omp|GCC[ \t]+(ivdep|unroll))([ \t]|$)/)
            bad("a preprocessor line other than #pragma omp (no #include, #define, #line)")
        next
    }
    if (code ~ /#|%:/) bad("a # outside a #pragma line")
    if (code ~ /<%|%>/) bad("a digraph brace")
    if (code ~ /\[\[/) bad("an attribute [[...]]")
    w = code; gsub(/[^A-Za-z0-9_]+/, " ", w); m = split(w, ids, " ")
    for (k = 1; k <= m; k++)
        if (ids[k] ~ /^(asm|__asm|__asm__|__attribute|__attribute__|_Pragma|__declspec)$/)
            bad("the keyword " ids[k])
    for (i = 1; i <= length(code); i++) {
        c = substr(code, i, 1)
        if (c == "{") depth++
        if (c == "}" && --depth < 0) { bad("a } that closes the function around the region"); depth = 0 }
    }
}
END { exit n > 0 }'

# The instructor's marked files and the parts they hold (a part may span several files).
marked=$(cd "$instructor" && grep -rlE --include='*.c' --include='*.h' \
    '^[[:space:]]*/\* (BEGIN SOLUTION|YOUR CODE HERE \(part) ' \
    precision autograd nn optim dist examples bench src 2>/dev/null | sort)

# The submission's regions, per part: $res/sub/PART/FILE, checked against the rules.
for p in $all_parts; do
    d="$res/sub/$p"; mkdir -p "$d"; : > "$d/.problems"
    for f in $marked; do
        want=$(awk -v p="$p" "$MARKS"'is_begin($0, p) { n++ } END { print n + 0 }' "$instructor/$f")
        [ "$want" -gt 0 ] || continue
        echo "$f" >> "$d/.files"
        mkdir -p "$d/$(dirname "$f")"
        if [ ! -f "$student/$f" ]; then
            echo "the submission has no $f" >> "$d/.problems"; continue
        fi
        awk -v p="$p" "$EXTRACT_AWK" "$student/$f" > "$d/$f"
        have=$(grep -c "$(printf '^\001$')" "$d/$f")
        if [ "$have" != "$want" ]; then
            echo "$f has $have region(s) of part $p between YOUR CODE HERE and END OF YOUR CODE; the assignment has $want" >> "$d/.problems"
            continue
        fi
        awk -v file="$f" "$MARKS$RULES_AWK" "$d/$f" >> "$d/.problems" ||
            echo "(the rules: docs/coursework.md, \"What a region may hold\")" >> "$d/.problems"
    done
done

# The sandboxes. Build: the tree writable, nothing else of the host but /usr and /etc; run:
# the runtime view read-only, the binary, a private /tmp. Neither has network or capabilities.
# The environment inside is made, not inherited: PATH, HOME, and the switches the tests and
# OpenMP honour (OMP_*, TAPEGRAD_NO_* to simulate a CPU without an instruction).
# Of /etc only what the compiler, the loader and MPI read (the tools' alternatives, the loader's
# cache, OpenMPI's defaults, the user and host names): not the host's secrets.
etc=""
for f in /etc/alternatives /etc/ld.so.cache /etc/ld.so.conf /etc/ld.so.conf.d /etc/openmpi \
         /etc/passwd /etc/group /etc/hosts /etc/nsswitch.conf /etc/localtime /etc/openblas; do
    [ -e "$f" ] && etc="$etc --ro-bind $f $f"
done
passenv=$(env | awk -F= '/^(OMP_[A-Z_]+|TAPEGRAD_NO_[A-Z0-9_]+)=/ { print $1 }')
box() {
    if [ "$sandbox" = 1 ]; then
        set -- --setenv PATH /usr/local/bin:/usr/bin:/bin "$@"
        for v in $passenv; do set -- --setenv "$v" "$(printenv "$v")" "$@"; done
        bwrap --clearenv --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
              --symlink usr/bin /bin --symlink usr/sbin /sbin $etc \
              --ro-bind-try /sys/devices/system/cpu /sys/devices/system/cpu \
              --proc /proc --dev /dev --tmpfs /tmp --unshare-all --unshare-user \
              --uid 1000 --gid 1000 --cap-drop ALL --die-with-parent --new-session \
              --setenv HOME /tmp "$@"
    else (
        while [ "$1" != -- ]; do
            case "$1" in --chdir) cd "$2" || exit 1; shift 2 ;; --setenv) export "$2=$3"; shift 3 ;;
                         --bind|--ro-bind) shift 3 ;; *) shift ;; esac
        done
        shift; exec "$@"
    ) fi
}
jobs="${GRADE_JOBS:-2}"
wrap="-fopenmp $work/grade_runner.o -Wl,--wrap=_cmocka_run_group_tests,--wrap=_skip"
targets=$(for b in $binaries; do printf 'build/tests/%s ' "$b"; done)

# The base: the instructor's tree and graded tests, built once, in the sandbox at $tree. A
# test that does not build there (no source) fails its rows in every part's tree.
# GRADE_BASE_CACHE=DIR keeps that build for the next grading with the same --work, instructor
# sources, runner and tests (grading many submissions in a row): its key is their checksum.
cc -O2 -Wall -Wextra $(pkg-config --cflags cmocka 2>/dev/null) -c "$runner_src" -o "$work/grade_runner.o" ||
    die "cannot compile $runner_src"
key=""; cache="${GRADE_BASE_CACHE:-}"
if [ -n "$cache" ]; then
    key=$({ (cd "$instructor" && tar cf - --exclude=./.git --exclude='./build*' --sort=name \
                 --mtime=@0 --owner=0 --group=0 .); cat "$runner_src"; echo "$work $targets";
            cc --version; } | md5sum | cut -d' ' -f1)
fi
if [ -n "$key" ] && [ "$(cat "$cache/key" 2> /dev/null)" = "$key" ]; then
    echo "grade: the instructor's tree, built before ($cache)" >&2
    cp -a "$cache/base" "$work/base"
    cp "$cache/base.build" "$res/base.build"
else
    echo "grade: building the instructor's tree" >&2
    (cd "$instructor" && tar cf - --exclude=./.git --exclude='./build*' .) | (mkdir -p "$tree" && cd "$tree" && tar xf -)
    box --bind "$tree" "$tree" --ro-bind "$work/grade_runner.o" "$work/grade_runner.o" --chdir "$tree" -- \
        make -k -j"$jobs" BUILD=build "LDFLAGS=$wrap" $targets > "$res/base.build" 2>&1
    mv "$tree" "$work/base"
    if [ -n "$key" ]; then
        rm -rf "$cache" && mkdir -p "$cache" && cp -a "$work/base" "$cache/base" &&
            cp "$res/base.build" "$cache/base.build" && echo "$key" > "$cache/key"
    fi
fi

export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
for p in $all_parts; do
    echo "grade: part $p" >&2
    d="$res/sub/$p"
    prows=$(printf '%s\n' "$rows" | awk -F'\t' -v p="$p" '$3 == p')
    if [ -s "$d/.problems" ]; then
        state=problems
    else
        state=built
        # The instructor's sources (linked: never written) with this part's regions replaced,
        # and a copy of the base's build, so that only what the regions touch is rebuilt.
        cp -al "$work/base" "$tree" && rm -rf "$tree/build" && cp -a "$work/base/build" "$tree/build"
        for f in $(cat "$d/.files" 2>/dev/null); do
            awk -v p="$p" -v bodies="$d/$f" "$COMPOSE_AWK" "$work/base/$f" > "$tree/$f.new" &&
                mv "$tree/$f.new" "$tree/$f"
        done
        ptargets=$(printf '%s\n' "$prows" | cut -f1 | sort -u | sed 's|^|build/tests/|')
        # The base's binaries of this part go first: a region that does not compile must not
        # leave the instructor's binary in place.
        (cd "$tree" && rm -f $ptargets)
        box --bind "$tree" "$tree" --ro-bind "$work/grade_runner.o" "$work/grade_runner.o" \
            --chdir "$tree" -- timeout -k 5 900 make -j"$jobs" BUILD=build "LDFLAGS=$wrap" \
            $ptargets > "$res/$p.build" 2>&1 < /dev/null
        # What a test process sees of the tree: no source, object, library or page, and only
        # its own binary (bound per row).
        cp -al "$tree" "$work/view"
        rm -rf "$work/view/build/obj" "$work/view/build/lib" "$work/view/build/tests" \
               "$work/view/docs" "$work/view/scripts/assignment.sh"
        find "$work/view" \( -name '*.[ch]' -o -name '*.md' -o -name '*.d' -o -name parts.tsv \) \
             -type f -exec rm -f {} +
        # Empty stand-ins: the row's binary is bound over its own (a read-only view cannot
        # take a new mount point).
        mkdir -p "$work/view/build/tests"
        (cd "$work/view" && touch $ptargets)
    fi
    printf '%s\n' "$prows" | while IFS="$(printf '\t')" read -r b t _ _ _; do
        row="$res/$p.$b.$(echo "$t" | tr '*' '@')"
        if [ "$state" = problems ]; then
            { echo "part $p was not built: its regions in the submission break a rule:"; cat "$d/.problems"; } > "$row.out"
            echo problems > "$row.rc"; echo 0 > "$row.ok"; continue
        fi
        if [ ! -x "$tree/build/tests/$b" ]; then
            { echo "$b did not build; the end of the build log:"; tail -n 25 "$res/$p.build"; } > "$row.out"
            echo build > "$row.rc"; echo 0 > "$row.ok"; continue
        fi
        token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
        printf '%s\n' "$token" > "$res/token"
        need=1
        : > "$row.verdict"
        stdbuf=""
        command -v stdbuf > /dev/null 2>&1 && stdbuf="stdbuf -oL"
        case "$b" in
            # mpirun closes fds 3 and 4 of its ranks: the token goes in their environment
            # (tests/grade_runner.c scrubs it) and the verdict to a bound file, one per rank.
            test_dist_*) need="${DIST_RANKS:-4}"
                         set -- --bind "$row.verdict" /run/grade-verdict \
                                --setenv TAPEGRAD_GRADE_VERDICT /run/grade-verdict \
                                --setenv TAPEGRAD_GRADE_TOKEN "$token" -- \
                                timeout -k 2 "$limit" sh scripts/mpirun -np "$need" "build/tests/$b" ;;
            *) set -- -- timeout -k 2 "$limit" $stdbuf "build/tests/$b" ;;
        esac
        # fd 3: the token (read and closed before the first test); fd 4: the verdict file.
        box --ro-bind "$work/view" "$tree" --ro-bind "$tree/build/tests/$b" "$tree/build/tests/$b" \
            --chdir "$tree" --setenv TAPEGRAD_GRADE_TEST "$t" --setenv CMOCKA_MESSAGE_OUTPUT stdout \
            "$@" 3< "$res/token" 4>> "$row.verdict" < /dev/null > "$row.full" 2>&1
        rc=$?
        rm -f "$res/token"
        # A long output keeps its first and last 8 KiB (the report is at the end).
        if [ "$(wc -c < "$row.full")" -gt 16384 ]; then
            { head -c 8192 "$row.full"; printf '\n[... %s bytes left out ...]\n' "$(( $(wc -c < "$row.full") - 16384 ))"
              tail -c 8192 "$row.full"; } > "$row.out"
        else
            cp "$row.full" "$row.out"
        fi
        rm -f "$row.full"
        echo "$rc" > "$row.rc"
        ok=0
        if [ "$rc" = 0 ]; then
            if [ "$t" = '*' ]; then
                grep -q "^$token pass " "$row.verdict" && ! grep -q "^$token \(fail\|skip\) " "$row.verdict" && ok=1
            else
                [ "$(grep -c "^$token pass $t " "$row.verdict")" = "$need" ] && ok=1
            fi
        fi
        echo "$ok" > "$row.ok"
    done
    rm -rf "$tree" "$work/view"
done
rm -rf "$work/base"

tmp="$out.tmp.$$"
printf '%s\n' "$rows" | awk -F'\t' -v res="$res" -v limit="$limit" -v json="$tmp" -v sandbox="$sandbox" '
function esc(s) {
    gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); gsub(/\t/, "\\t", s); gsub(/\r/, "\\r", s)
    gsub(/\n/, "\\n", s); gsub(/[\001-\037]/, " ", s)
    return s
}
function slurp(file,   line, s) {
    s = ""
    while ((getline line < file) > 0) s = s line "\n"
    close(file)
    return s
}
function first(file,   line) { line = ""; getline line < file; close(file); return line }
function why(rc, b) {
    if (rc == "build" || rc == "problems") return ""
    if (rc == 124 || rc == 137) return b " ran out of time (" limit " s)\n"
    if (rc > 128) return b " crashed (signal " rc - 128 ")\n"
    if (rc == 1) return ""
    if (rc != 0) return b " exited with status " rc "\n"
    return b " exited 0 without the grader'"'"'s token: it did not finish this test\n"
}
{
    b = $1; name = $2; part = $3; pts = $4 + 0; vis = $5
    row = res "/" part "." b "." (name == "*" ? "@" : name)
    ok = first(row ".ok") == "1"; r = first(row ".rc")
    text = (ok ? "" : why(r, b)) slurp(row ".out")
    score = ok ? pts : 0
    total += score; max += pts; n++
    label = part ": " b (name == "*" ? "" : " " name)
    # Concatenation, not sprintf: an output may be long (mawk limits sprintf to 8 KiB).
    entries[n] = "    {\"name\": \"" esc(label) "\", \"score\": " score ", \"max_score\": " pts \
                 ", \"visibility\": \"" vis "\", \"tags\": [\"" esc(part) "\"], \"output\": \"" esc(text) "\"}"
    printf "%-24s %-52s %5s / %-5s %s%s\n", part, b (name == "*" ? "" : " " name), score, pts,
           (ok ? "pass" : "FAIL"), (vis == "visible" ? "" : " (" vis ")")
    if (!(part in pscore)) order[++np] = part
    pscore[part] += score; pmax[part] += pts
}
END {
    note = sandbox ? "" : "graded without the sandbox (--no-sandbox): the submission could read and write the host"
    printf "{\n  \"score\": %s,\n  \"max_score\": %s,\n", total, max > json
    if (note != "") printf "  \"output\": \"%s\",\n", note > json
    printf "  \"tests\": [\n" > json
    for (i = 1; i <= n; i++) print entries[i] (i < n ? "," : "") > json
    printf "  ]\n}\n" > json
    print ""
    for (i = 1; i <= np; i++) printf "%-24s %5s / %s\n", order[i], pscore[order[i]], pmax[order[i]]
    printf "%-24s %5s / %s\n", "total", total, max
}' || die "could not write the results"
mv "$tmp" "$out"
echo "grade: wrote $out"
