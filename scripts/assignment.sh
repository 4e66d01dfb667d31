#!/bin/sh
# Coursework: writes a student tree from the sources, with the solution regions replaced.
#
#   sh scripts/assignment.sh [--parts a,b] [--out DIR] [--solutions DIR]
#   sh scripts/assignment.sh --list                 the parts and where their regions are
#   sh scripts/assignment.sh --instructor-only      the files the student tree leaves out
#   sh scripts/assignment.sh --restore STUDENT_DIR SOLUTIONS_DIR
# --source DIR (first) works on another tree than the one holding this script; paths are then
# relative to DIR. tests/coursework_check.sh uses it on small trees with broken regions.
#
# A solution region is a run of whole lines in a .c or .h file (docs/coursework.md):
#
#       /* BEGIN SOLUTION part_name */
#       ... the code the student writes ...
#       /* STUDENT
#       ... optional: what the student tree holds instead, so that it compiles ...
#       */
#       /* END SOLUTION part_name */
#
# In the student tree the region becomes
#
#       /* YOUR CODE HERE (part part_name) */
#       ... the STUDENT lines ...
#       /* END OF YOUR CODE (part part_name) */
#
# --solutions DIR writes the regions taken out (the original lines, one file per source file)
# and --restore puts them back between those two lines, giving the sources byte for byte.
# Regions of parts not in --parts stay as they are. What only instructors hold (the hidden tests
# of tests/parts.tsv, this script and its test, docs/coursework.md) is left out.
set -eu
caller=$(pwd)
cd "$(dirname "$0")/.."

die() { echo "assignment: $*" >&2; exit 1; }

# Where regions may be: the library, the programs and the benchmarks (not docs, not tests).
marked_files() {
    grep -rlE --include='*.c' --include='*.h' '^[[:space:]]*/\* (BEGIN|END) SOLUTION ' \
        precision autograd nn optim dist examples bench 2>/dev/null | sort
}

# The lines of every region's begin marker, as "part<TAB>file:line".
list_parts() {
    for f in $(marked_files); do
        awk -v f="$f" '/^[ \t]*\/\* BEGIN SOLUTION [A-Za-z0-9_]+ \*\/[ \t]*$/ {
            print $4 "\t" f ":" NR }' "$f"
    done
}

# What only the instructor tree holds: the hidden tests (every test binary with a row of
# tests/parts.tsv whose visibility is not "visible"), this script and its test (which need the
# regions), and the instructors' page.
instructor_only() {
    awk -F'\t' '!/^#/ && NF >= 5 && $5 != "visible" { print "tests/" $1 ".c" }' tests/parts.tsv |
        sort -u
    echo scripts/assignment.sh
    echo tests/test_coursework.c
    echo tests/coursework_check.sh
    if [ -d tests/grader_fixture ]; then find tests/grader_fixture -type f | sort; fi
    echo docs/coursework.md
    # The homework's answer: the reference search (fit_largest and its search library), their
    # tests, and the page with its winners. The student tree gets its own docs/fit_largest.md
    # (the task, the table to fill, the measurement tools: student_homework below).
    for f in examples/fit_largest/*.c examples/fit_largest/*.h plan/fit_search.c \
             plan/fit_max_batch.c plan/fit_winner.c plan/fit_search.h tests/test_fit_search.c \
             tests/test_fit_largest_cli.c \
             docs/fit_largest.md docs/measured/fit_largest*; do
        [ -f "$f" ] && echo "$f"
    done
}

# The state machine of one file: strips the regions of the parts in `parts` (a list ",a,b,"),
# checks every region's shape (even those kept), writes the student file to stdout and the
# regions taken out to `sol`.
STRIP_AWK='
function fail(msg) { printf "assignment: %s:%d: %s\n", FILENAME, NR, msg > "/dev/stderr"; bad = 1; exit 1 }
function marker(kind,   re) {
    re = "^[ \t]*/\\* " kind " SOLUTION [A-Za-z0-9_]+ \\*/[ \t]*$"
    return $0 ~ re
}
BEGIN { state = 0 }
{
    if (state == 0) {
        if (marker("END")) fail("END SOLUTION without a BEGIN")
        if ($0 ~ /^[ \t]*\/\* STUDENT[ \t]*$/) fail("STUDENT block outside a region")
        if (!marker("BEGIN")) { print; next }
        part = $4; strip = index(parts, "," part ",") > 0
        indent = $0; sub(/[^ \t].*$/, "", indent)
        nstudent = 0; state = 1
        if (strip) print $0 > sol; else print
        next
    }
    if (marker("BEGIN")) fail("BEGIN SOLUTION " $4 " inside the region of part " part)
    if (state == 2) {
        if ($0 ~ /^[ \t]*\*\/[ \t]*$/) state = 3
        else student[++nstudent] = $0
    } else if (marker("END")) {
        if ($4 != part) fail("END SOLUTION " $4 " closes the region of part " part)
        state = 0
        if (strip) {
            print $0 > sol
            print indent "/* YOUR CODE HERE (part " part ") */"
            for (i = 1; i <= nstudent; i++) print student[i]
            print indent "/* END OF YOUR CODE (part " part ") */"
        } else print
        next
    } else if (state == 3) {
        fail("only the END SOLUTION line may follow a STUDENT block")
    } else if ($0 ~ /^[ \t]*\/\* STUDENT[ \t]*$/) {
        state = 2
    }
    if (strip) print $0 > sol; else print
}
END { if (!bad && state != 0) { printf "assignment: %s: the region of part %s never ends\n", FILENAME, part > "/dev/stderr"; exit 1 } }
'

# Puts the regions of `sol` back into a student file, in order.
RESTORE_AWK='
function fail(msg) { printf "assignment: %s:%d: %s\n", FILENAME, NR, msg > "/dev/stderr"; exit 1 }
/^[ \t]*\/\* YOUR CODE HERE \(part [A-Za-z0-9_]+\) \*\/[ \t]*$/ {
    part = $6; inside = 1
    while ((getline line < sol) > 0) {
        print line
        if (line ~ /^[ \t]*\/\* END SOLUTION [A-Za-z0-9_]+ \*\/[ \t]*$/) break
    }
    next
}
inside && /^[ \t]*\/\* END OF YOUR CODE \(part [A-Za-z0-9_]+\) \*\/[ \t]*$/ { inside = 0; next }
inside { next }
{ print }
END { if (inside) fail("the region of part " part " never ends") }
'

# The student's guide, written into the student tree as ASSIGNMENT.md.
student_readme() {
    cat <<'EOT'
# Your assignment

Some functions of this tree have lost their body: each gap sits between

    /* YOUR CODE HERE (part NAME) */
    ...
    /* END OF YOUR CODE (part NAME) */

and what stands between those lines now is only there so that the tree compiles. Write the
code in its place; keep the two marker lines. The comment above each function states the math
it has to compute, and the docs/ page of its topic explains why.

    make            # must build with zero warnings (-Wall -Wextra)
    make test       # the cmocka suite; a failing test prints its reference numbers
    make grade      # runs the graded tests as the grader will (hidden tests excepted)

Only the code between the two marker lines is graded: the grader takes each part's gaps
from your tree, puts them into the reference tree (the reference code for every other part),
and builds and runs that part's tests of tests/parts.tsv there, each test alone, with a time
limit. A test that crashes, hangs or exits early scores 0 and costs no other test anything.
Nothing else of your tree is used (its tests, Makefile or other files), and a gap may hold
statements only: no #include or #define, no asm, no attributes, no brace that closes the
function (the grader says which rule a gap breaks, and that part scores 0). Some tests are
hidden: only the grader has them. In your own `make test` a test may also fail because a part
it builds on is still missing (a GPT's gradient needs every op's backward): start with the
parts that come first in the table below.

## The parts

| part | where | points (visible tests) |
|---|---|---|
EOT
    # In the table's order (the suggested sequence), then any part the table does not grade.
    ordered=$( (awk -F'\t' '!/^#/ && NF >= 5 && !seen[$3]++ { print $3 }' tests/parts.tsv
               echo "$1" | tr ',' '\n' | sort) | awk -v want=",$1," 'index(want, "," $0 ",") && !seen[$0]++')
    for p in $ordered; do
        where=$(cd "$out" && for f in $(cd "$OLDPWD" && marked_files); do
                    awk -v f="$f" -v m="/* YOUR CODE HERE (part $p) */" \
                        'index($0, m) { printf "%s:%d\n", f, FNR }' "$f"
                done | awk '{ printf "%s%s", sep, $0; sep = ", " }')
        pts=$(awk -F'\t' -v p="$p" '!/^#/ && $3 == p && $5 == "visible" { s += $4 } END { print s + 0 }' \
              tests/parts.tsv)
        echo "| $p | $where | $pts |"
    done
    cat <<'EOT'

## The homework: fit the largest model you can

Under a fixed memory budget, train the largest model you can on `data/tinyshakespeare.txt` and
fill the table of `docs/fit_largest.md` (setup, parameters, peak memory measured, eval loss,
batch size, time, a sample). `train_gpt --mem-budget 64MiB` enforces the budget, and
`memory_calculator` predicts a configuration's bytes before you run it.
EOT
}

# The homework's page in the student tree: the task, the rules the budget follows, the table to
# fill and the tools; the instructor's page (the reference search and its winners) stays out.
student_homework() {
    cat <<'EOT'
# Fit the largest model you can: the homework on CPU

Given a fixed memory budget, train the largest model you can on the character-level Shakespeare
corpus (`data/tinyshakespeare.txt`), using what the lectures taught: batch size and gradient
accumulation, activation checkpointing, 8-bit optimizers and optimizers with less state, mixed
precision. The checkpointing lecture adds an exercise: the largest batch that fits with and
without checkpointing.

## The budget, enforced

`train_gpt --mem-budget SIZE` limits the bytes the run holds in use, over every category of the
accounting allocator (`autograd/mem.h`, `mem_set_budget`), from before the model exists: an
allocation over the budget ends the run with the category and the bytes. Sizes are written
`67108864`, `64MiB`, `1.5GiB`. The run's memory report prints the peak of every category and the
total.

## The tools

- `build/bin/train_gpt` (`--help`): `--layers`, `--embd`, `--heads`, `--seq`, `--batch`,
  `--accum`, `--checkpoint`, `--precision`, `--optimizer`, `--mem-budget`, `--sample`.
- `build/bin/memory_calculator` (`--help`): the bytes a configuration needs, per category,
  before you spend a run on it.
- `docs/checkpointing.md`, `docs/batch_and_lr.md`, `docs/precision.md`, `docs/memory.md`: why
  each saving works and what it costs.

## Your table

Budgets 64 MiB and 256 MiB, about 120 s of training each. Peak memory is the total tracked bytes
over train_gpt's whole run, as its memory report prints it; eval loss is the validation
cross-entropy after the last update (nats per character; a uniform guess over the 65
characters is 4.17); the sample is 200 characters.

| budget | setup | parameters | peak memory measured (predicted) | eval loss | batch | updates | time | sample |
|---|---|---|---|---|---|---|---|---|
| 64 MiB | | | | | | | | |
| 256 MiB | | | | | | | | |

## The checkpointing exercise

For one model (L4 C128 H4, T 64, fp32, AdamW) and a 64 MiB budget: the largest `--batch` that
trains without checkpointing, with `--checkpoint sqrt` and with `--checkpoint memory-poor`,
found with `train_gpt --mem-budget` (a batch that fits, and the batch above it refused), and the
calculator's prediction beside each.
EOT
}

parts=""; out="build/assignment"; sols=""; mode=strip
while [ $# -gt 0 ]; do
    case "$1" in
        --parts) [ $# -ge 2 ] || die "--parts needs a value"; parts="$2"; shift 2 ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift 2 ;;
        --solutions) [ $# -ge 2 ] || die "--solutions needs a value"; sols="$2"; shift 2 ;;
        --source) [ $# -ge 2 ] || die "--source needs a value"
                  cd "$caller" && cd "$2" || die "no source tree '$2'"; shift 2 ;;
        --list) mode=list; shift ;;
        --instructor-only) instructor_only; exit 0 ;;
        --restore) [ $# -eq 3 ] || die "--restore needs STUDENT_DIR SOLUTIONS_DIR"
                   mode=restore; out="$2"; sols="$3"; shift 3 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

if [ "$mode" = list ]; then
    list_parts
    exit 0
fi

if [ "$mode" = restore ]; then
    [ -d "$sols" ] || die "no solutions directory '$sols'"
    (cd "$sols" && find . -type f ! -name .tapegrad-solutions | sort) | while read -r f; do
        f=${f#./}
        [ -f "$out/$f" ] || die "$out/$f is missing"
        awk -v sol="$sols/$f" "$RESTORE_AWK" "$out/$f" > "$out/$f.restore.tmp"
        mv "$out/$f.restore.tmp" "$out/$f"
    done
    exit 0
fi

# Every region's shape is checked before anything is written.
for f in $(marked_files); do
    awk -v parts=, -v sol=/dev/null "$STRIP_AWK" "$f" > /dev/null
done
known=$(list_parts | cut -f1 | sort -u)
[ -n "$known" ] || die "no solution regions in the sources"
if [ -z "$parts" ]; then
    parts=$(echo $known | tr ' ' ',')
fi
for p in $(echo "$parts" | tr ',' ' '); do
    echo "$known" | grep -qx "$p" || die "unknown part '$p' in PARTS (known: $(echo $known))"
done

# The output directory is rebuilt from nothing, so it must be one this script made (or new).
# The tree is written beside it and renamed at the end: an error leaves nothing half-written.
if [ -e "$out" ]; then
    [ -f "$out/.tapegrad-assignment" ] || die "'$out' exists and was not made by this script"
fi
final="$out"
mkdir -p "$(dirname "$final")"
case "$(cd "$(dirname "$final")" && pwd)/$(basename "$final")/" in
    "$(pwd)"/build*/*) ;;
    "$(pwd)"/*) die "'$final' is inside the source tree: put it under build/ or outside" ;;
esac
out="$final.partial.$$"
trap 'rm -rf "$out"' EXIT
if [ -n "$sols" ] && [ -e "$sols" ]; then
    [ -f "$sols/.tapegrad-solutions" ] || die "'$sols' exists and was not made by this script"
    rm -rf "$sols"
fi
mkdir -p "$out"
: > "$out/.tapegrad-assignment"
if [ -n "$sols" ]; then
    mkdir -p "$sols"
    : > "$sols/.tapegrad-solutions"
fi

find . \( -path ./.git -o -path './build*' \) -prune -o -type f -print | sed 's|^\./||' |
    grep -vxF -e tests/parts.tsv $(for h in $(instructor_only); do printf ' -e %s' "$h"; done) |
    sort > "$out/.files"
tar cf - -T "$out/.files" | (cd "$out" && tar xf -)
rm "$out/.files"
# The table without its hidden rows: the student sees the points of what is graded visibly.
mkdir -p "$out/tests"
awk -F'\t' '/^#/ || NF < 5 || $5 == "visible"' tests/parts.tsv > "$out/tests/parts.tsv"

for f in $(marked_files); do
    sol=/dev/null
    if [ -n "$sols" ]; then
        mkdir -p "$sols/$(dirname "$f")"
        sol="$sols/$f"
    fi
    awk -v parts=",$parts," -v sol="$sol" "$STRIP_AWK" "$f" > "$out/$f"
    # A file whose regions were all kept leaves no (empty) solution file behind.
    [ "$sol" = /dev/null ] || [ -s "$sol" ] || rm -f "$sol"
done
student_readme "$parts" > "$out/ASSIGNMENT.md"
if [ -f docs/fit_largest.md ]; then student_homework > "$out/docs/fit_largest.md"; fi
# The README's list of pages names the instructors' page, which the student tree does not hold:
# that item points to the student's guide instead.
awk '/^[0-9]+\. `docs\/coursework\.md`/ {
         n = $1; skip = 1
         print n " `ASSIGNMENT.md`: your assignment: the parts to write, where they are, how they"
         print "   are graded, and the homework (`docs/fit_largest.md`)."
         next
     }
     /^[0-9]+\. `docs\/fit_largest\.md`/ {
         n = $1; skip = 1
         print n " `docs/fit_largest.md`: the homework \"fit the largest model you can\" under a memory"
         print "   budget the allocator enforces, with the checkpointing exercise."
         next
     }
     skip && /^   / { next }
     { skip = 0; gsub(/ \(\[docs\/coursework\.md\]\(docs\/coursework\.md\)\)/, ""); print }' README.md > "$out/README.md"
rm -rf "$final"
mv "$out" "$final"
trap - EXIT
echo "assignment: wrote $final (parts: $(echo "$parts" | tr ',' ' '))"
