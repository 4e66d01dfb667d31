#!/bin/sh
# Checks that every marked number in docs/*.md is what its command prints now (issue 28).
#
#   sh scripts/check_docs.sh [--build DIR] [--slow] [--update] [--cache DIR] [DOC.md ...]
#
# Every command runs with TAPEGRAD_KERNELS=portable (the same bits on every x86-64 CPU and
# thread count), from the repository root, with the word `build` (or `build/...`) in it replaced
# by DIR. Without --slow, the quick commands run and the slow ones are compared with the output
# they recorded; --slow (make figures) runs the slow ones too, after figures.sh. --update writes
# the fresh numbers into the docs instead of failing (to regenerate them). --cache DIR keeps
# the quick commands' outputs there and reuses them (tests/check_docs.sh checks edited copies).
#
# The markers are HTML comments, invisible when the page is rendered:
#
#   <!-- cmd NAME: COMMAND -->            a quick command (seconds), run by make check-docs
#   <!-- cmd NAME slow FILE: COMMAND -->    a slow one (minutes): make figures runs it, and it
#                                          writes FILE (committed), which make check-docs reads
#   <!-- cmd NAME figure FILE: COMMAND -->  FILE is written by COMMAND, which make figures runs
#   NUMBER<!-- NAME: ROW, COLUMN -->       NAME's output is a TSV: the row whose first field is
#                                          ROW, in the column headed COLUMN
#   NUMBER<!-- NAME: /REGEX/ K -->         the K-th number on NAME's first line matching REGEX
#   NUMBER<!-- NAME: ... *100 -->          the value times 100 (or /1e6, ...) before comparing
#   NUMBER<!-- NAME: ...; timing -->       depends on the machine: listed, never compared
#   NUMBER<!-- = 36864 + 73728 -->         a formula (awk arithmetic), no command; a term
#                                          NAME[ROW, COLUMN] or NAME[/REGEX/ K] is that value
#
# A marker follows its number directly (a `%`, `x` or `**` may sit between them). A number may
# group thousands with spaces or commas (`1 646 592`, `16,189,468`). The fresh value is rounded
# to the digits the doc shows (`1.81` compares with 1.8099...) and must print the same.
# A `cmd` marker stands on a line of its own (it may hold `--flags`); a number's marker stands
# inside a line, where an HTML comment may not hold `--`, and in a table a `|` is written `\|`.
# No marker goes inside a code block, where it would show.
set -u
build=build; slow=0; update=0; cache=""
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=${2:?--build needs a folder}; shift 2 ;;
        --slow) slow=1; shift ;;
        --update) update=1; shift ;;
        --cache) cache=${2:?--cache needs a folder}; mkdir -p "$cache" || exit 2; shift 2 ;;
        -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "check_docs: unknown flag $1 (see --help)" >&2; exit 2 ;;
        *) break ;;
    esac
done
cd "$(dirname "$0")/.." || exit 2
[ $# -gt 0 ] || set -- docs/*.md
if [ ! -d "$build/bin" ]; then
    echo "check_docs: --build $build: no $build/bin (build first: make BUILD=$build all)" >&2
    exit 2
fi
export TAPEGRAD_KERNELS=portable
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_docs.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
# Each doc is read twice: the first pass collects its commands, the second checks its markers.
files=""
for d in "$@"; do
    [ -f "$d" ] || { echo "check_docs: $d: no such file" >&2; exit 2; }
    files="$files $d $d"
done
# shellcheck disable=SC2086
awk -v build="$build" -v slow="$slow" -v update="$update" -v tmp="$tmp" -v cache="$cache" -f scripts/check_docs.awk $files
status=$?
if [ "$update" = 1 ]; then
    for d in "$@"; do
        if [ -f "$tmp/$(basename "$d").new" ] && ! cmp -s "$d" "$tmp/$(basename "$d").new"; then
            cp "$tmp/$(basename "$d").new" "$d" && echo "updated $d"
        fi
    done
fi
exit $status
