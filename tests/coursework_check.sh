#!/bin/sh
# Checks of scripts/assignment.sh, run by tests/test_coursework.c from the source tree:
#   sh tests/coursework_check.sh roundtrip DIR   strip every part, put the solutions back, and
#                                                compare with the sources byte for byte
#   sh tests/coursework_check.sh partial DIR     PARTS=gelu_backward changes one file only
#   sh tests/coursework_check.sh unknown DIR     an unknown part name is an error naming it
#   sh tests/coursework_check.sh malformed DIR   broken regions are refused with file and line
# DIR is an empty scratch directory. Prints what is wrong and exits 1 on the first failure.
set -u
cd "$(dirname "$0")/.."
what="$1"; dir="$2"
fail() { echo "coursework_check $what: $*"; exit 1; }
hidden=$(sh scripts/assignment.sh --instructor-only)
[ -n "$hidden" ] || fail "no instructor-only files"
sources() { find . \( -path ./.git -o -path './build*' \) -prune -o -type f -print | sed 's|^\./||' | sort; }

case "$what" in
roundtrip)
    sh scripts/assignment.sh --out "$dir/student" --solutions "$dir/sol" > "$dir/log" 2>&1 ||
        fail "strip failed: $(cat "$dir/log")"
    marked=$(sh scripts/assignment.sh --list | cut -f2 | cut -d: -f1 | sort -u)
    [ -n "$marked" ] || fail "no marked files"
    for f in $marked; do
        cmp -s "$f" "$dir/student/$f" && fail "$f is unchanged in the student tree"
        grep -q 'BEGIN SOLUTION' "$dir/student/$f" && fail "$f keeps a BEGIN SOLUTION line"
        grep -q 'YOUR CODE HERE (part ' "$dir/student/$f" || fail "$f has no YOUR CODE HERE line"
    done
    for h in $hidden; do
        [ "$h" = docs/fit_largest.md ] && continue
        [ -e "$dir/student/$h" ] && fail "$h is in the student tree"
    done
    # The homework's page is the student's own: the task and the table to fill, no answer
    # (the instructor's page names its winners' setups, e.g. L1 C640 H20).
    grep -q 'Your table' "$dir/student/docs/fit_largest.md" || fail "the student's docs/fit_largest.md has no table to fill"
    grep -qiE 'winner|C640|fit_largest --' "$dir/student/docs/fit_largest.md" &&
        fail "the student's docs/fit_largest.md holds the reference answer"
    grep -rqs 'fit_largest --budget' "$dir/student/ASSIGNMENT.md" "$dir/student/README.md" &&
        fail "the student tree points to the reference search"
    ls "$dir/student/docs/measured" 2>/dev/null | grep -q fit_largest &&
        fail "the student tree holds fit_largest's recorded output"
    awk -F'\t' '!/^#/ && NF >= 5 && $5 != "visible"' "$dir/student/tests/parts.tsv" | grep -q . &&
        fail "the student's tests/parts.tsv lists hidden tests"
    sh scripts/assignment.sh --restore "$dir/student" "$dir/sol" > "$dir/log" 2>&1 ||
        fail "restore failed: $(cat "$dir/log")"
    n=0
    for f in $(sources); do
        case " $(echo $hidden) tests/parts.tsv README.md " in *" $f "*) continue ;; esac
        [ -f "$dir/student/$f" ] || fail "$f is missing from the student tree"
        cmp -s "$f" "$dir/student/$f" || fail "$f differs after the round trip: $(diff "$f" "$dir/student/$f" | head -5)"
        n=$((n + 1))
    done
    for f in $(cd "$dir/student" && find . -type f | sed 's|^\./||'); do
        [ -f "$f" ] && continue
        case "$f" in ASSIGNMENT.md|.tapegrad-assignment) ;; *) fail "unexpected file $f in the student tree" ;; esac
    done
    # The README is the one file rewritten: its pages point to ASSIGNMENT.md, not to the
    # instructors' page the student tree does not hold.
    grep -q 'docs/coursework' "$dir/student/README.md" && fail "the student README names docs/coursework.md"
    grep -q '`ASSIGNMENT.md`' "$dir/student/README.md" || fail "the student README does not name ASSIGNMENT.md"
    echo "round trip: $n files identical, $(echo $marked | wc -w) marked files restored"
    ;;
partial)
    sh scripts/assignment.sh --parts gelu_backward --out "$dir/student" > "$dir/log" 2>&1 ||
        fail "strip failed: $(cat "$dir/log")"
    changed=""
    for f in $(sh scripts/assignment.sh --list | cut -f2 | cut -d: -f1 | sort -u); do
        cmp -s "$f" "$dir/student/$f" || changed="$changed $f"
    done
    [ "$changed" = " autograd/ops_elementwise.c" ] || fail "changed:$changed"
    grep -q 'YOUR CODE HERE (part gelu_backward)' "$dir/student/autograd/ops_elementwise.c" ||
        fail "no gelu_backward gap"
    echo "partial: only autograd/ops_elementwise.c changed"
    ;;
unknown)
    if sh scripts/assignment.sh --parts gelu_backward,no_such_part --out "$dir/student" > "$dir/log" 2>&1; then
        fail "an unknown part was accepted"
    fi
    grep -q "unknown part 'no_such_part'" "$dir/log" || fail "the message does not name the part: $(cat "$dir/log")"
    [ -e "$dir/student" ] && fail "a student tree was written anyway"
    echo "unknown: $(cat "$dir/log")"
    ;;
malformed)
    # A small tree per broken region: each is refused with the file and line, and writes nothing.
    n=0
    while IFS='|' read -r body says; do
        n=$((n + 1))
        src="$dir/src$n"
        mkdir -p "$src/precision" "$src/tests"
        printf '# binary\ttest\tpart\tpoints\tvisibility\n' > "$src/tests/parts.tsv"
        printf "int f(void)\n{\n$body}\n" > "$src/precision/broken.c"
        if sh scripts/assignment.sh --source "$src" --out "$dir/out$n" > "$dir/log" 2>&1; then
            fail "case $n was accepted: $body"
        fi
        grep -qF "$says" "$dir/log" || fail "case $n: want '$says', got: $(cat "$dir/log")"
        ls "$dir" | grep -q "^out$n" && fail "case $n left $(ls "$dir" | grep "^out$n")"
        echo "malformed $n: $(cat "$dir/log")"
    done <<'CASES'
    /* BEGIN SOLUTION p */\n    return 1;\n|precision/broken.c: the region of part p never ends
    /* BEGIN SOLUTION p */\n    return 1;\n    /* END SOLUTION q */\n|precision/broken.c:5: END SOLUTION q closes the region of part p
    /* BEGIN SOLUTION p */\n    /* BEGIN SOLUTION q */\n|precision/broken.c:4: BEGIN SOLUTION q inside the region of part p
    /* BEGIN SOLUTION p */\n    /* STUDENT\n    return 0;\n    */\n    return 1;\n    /* END SOLUTION p */\n|precision/broken.c:7: only the END SOLUTION line may follow a STUDENT block
    return 1;\n    /* END SOLUTION p */\n|precision/broken.c:4: END SOLUTION without a BEGIN
CASES
    ;;
*) fail "unknown check" ;;
esac
