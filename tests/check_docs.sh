#!/bin/sh
# make test's part of issue 28: every marked number in docs/*.md is what its command prints now
# (scripts/check_docs.sh, quick commands only; the slow ones against their recorded output),
# and the check fails when one marked number in a doc is changed: for the first number of each
# kind (from a quick command, from a slow command's recorded output, from a formula) a copy of
# its doc gets that number's last digit changed, and the check must name that line.
# Prints cmocka's summary lines, so that tests/run.sh counts the tests. BUILD: the build folder.
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build}
# Under SANITIZE=1 the programs run several times slower: the docs' numbers are the optimized
# build's business (the same bits in any build, in the portable mode), so the check is left out.
if [ "${SANITIZE:-0}" = 1 ]; then
    echo "check_docs: skipped under SANITIZE=1 (make check-docs runs it)"
    echo "[==========] 0 test(s) run."; echo "[  PASSED  ] 0 test(s)."; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_docs_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
passed=0; failed=""
result() {  # NAME OK
    if [ "$2" = 0 ]; then echo "[       OK ] $1"; passed=$((passed + 1))
    else echo "[  FAILED  ] $1"; failed="$failed $1"; fi
}

echo "[ RUN      ] check_docs_passes"
sh scripts/check_docs.sh --build "$build" --cache "$tmp/cache" > "$tmp/all.log" 2>&1; rc=$?
grep -v ': not compared: timing' "$tmp/all.log"
result check_docs_passes $rc

# FILE LINE INDEX: the first marker of each kind; INDEX counts the comments on that line.
awk '
    FNR == 1 { delete kind }
    { s = $0; while ((i = index(s, "<!-- cmd ")) > 0) {
          s = substr(s, i + 9); split(s, w, /[ :]/); kind[w[1]] = (s ~ /^[^ :]+ (slow|figure)/) ? "recorded" : "quick" } }
    { s = $0; k = 0
      while ((i = index(s, "<!--")) > 0) {
          k++; s = substr(s, i + 4); b = s; sub(/^ */, "", b)
          if (b ~ /^=/) t = "formula"
          else if (b ~ /^[A-Za-z0-9_.-]+:/ && b !~ /^cmd / && b !~ /timing *-->/) { n = b; sub(/:.*/, "", n); t = kind[n] }
          else continue
          if (t != "" && !(t in seen)) { seen[t] = 1; print t, FILENAME, FNR, k }
      } }' docs/*.md > "$tmp/targets"
for t in quick recorded formula; do
    name=check_docs_fails_on_a_changed_$t
    echo "[ RUN      ] $name"
    set -- $(awk -v t=$t '$1 == t { print $2, $3, $4 }' "$tmp/targets")
    if [ $# -ne 3 ]; then echo "no marked number of that kind in docs/*.md"; result $name 1; continue; fi
    copy="$tmp/$(basename "$1")"
    awk -v line="$2" -v k="$3" '
        FNR == line { s = $0; off = 0
            for (j = 1; j <= k; j++) { i = index(s, "<!--"); p = off + i; off += i + 3; s = substr(s, i + 4) }
            q = p - 1; while (q > 0 && substr($0, q, 1) !~ /[0-9]/) q--
            $0 = substr($0, 1, q - 1) ((substr($0, q, 1) + 1) % 10) substr($0, q + 1) }
        { print }' "$1" > "$copy"
    printf 'changed %s:%s: %s\n' "$1" "$2" "$(diff "$1" "$copy" | sed -n 's/^> //p' | cut -c1-100)"
    sh scripts/check_docs.sh --build "$build" --cache "$tmp/cache" "$copy" > "$tmp/one.log" 2>&1; rc=$?
    grep -v ': not compared: timing' "$tmp/one.log" | head -n 8
    if [ $rc -ne 0 ] && grep -q "^$copy:$2: the doc says" "$tmp/one.log"; then result $name 0; else result $name 1; fi
done

echo "[==========] $((passed + $(echo $failed | wc -w))) test(s) run."
echo "[  PASSED  ] $passed test(s)."
if [ -n "$failed" ]; then
    echo "[  FAILED  ] $(echo $failed | wc -w) test(s), listed below:"
    for f in $failed; do echo "[  FAILED  ] $f"; done
    exit 1
fi
