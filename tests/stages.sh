#!/usr/bin/env bash
# stages.sh TFC: golden dumps of the compiler's stages. For each
# tests/stages/PROGRAM[.O0].STAGE, `tfc --dump=STAGE [-O0] programs/PROGRAM.tfp`
# (run at the repository's root) must exit 0, write no weight file, and print
# exactly that file on stdout. Run with UPDATE=1 to rewrite the files (then
# review the diff: a change in a dump is a change in what the compiler does).
set -u
TFC=$1
ROOT=${TF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
for golden in tests/stages/*; do
    file=$(basename "$golden")
    stage=${file##*.}
    name=${file%.*}
    flags=()
    case $name in
    *.O0) flags=(-O0); name=${name%.O0} ;;
    esac
    src=programs/$name.tfp
    before=$(ls programs | wc -l)
    "$TFC" --dump="$stage" "${flags[@]}" "$src" >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ "${UPDATE:-0}" = 1 ] && [ "$status" -eq 0 ]; then cp "$tmp/out" "$golden"; fi
    if [ "$status" -ne 0 ]; then
        echo "FAIL: tfc --dump=$stage ${flags[*]} $src: exit status $status, want 0"
        cat "$tmp/err"
        failed=$((failed + 1))
    elif [ -e "programs/$name.tfw" ] || [ "$(ls programs | wc -l)" -ne "$before" ]; then
        echo "FAIL: tfc --dump=$stage $src wrote a file"
        rm -f "programs/$name.tfw"
        failed=$((failed + 1))
    elif ! diff -u "$golden" "$tmp/out" >"$tmp/diff"; then
        echo "FAIL: tfc --dump=$stage ${flags[*]} $src differs from $golden"
        cat "$tmp/diff"
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
done
# docs/language.md's excerpt of `tfc --dump=ir programs/sort.tfp`: every line but "..."
# of it must be a line of the golden dump.
awk '/^\$ tfc --dump=ir programs\/sort.tfp$/ {on = 1; next} on && /^```/ {exit} on' \
    docs/language.md >"$tmp/excerpt"
if [ ! -s "$tmp/excerpt" ]; then
    echo "FAIL: docs/language.md has no excerpt of tfc --dump=ir programs/sort.tfp"
    failed=$((failed + 1))
elif ! grep -vx -e "\.\.\." "$tmp/excerpt" | grep -vxF -f tests/stages/sort.ir >"$tmp/stale"; then
    passed=$((passed + 1))
else
    echo "FAIL: docs/language.md's dump of sort.tfp has lines tfc does not print:"
    cat "$tmp/stale"
    failed=$((failed + 1))
fi
# A stage that is not one is a usage error.
if "$TFC" --dump=lower programs/sort.tfp >/dev/null 2>"$tmp/err" || ! grep -q "unknown stage" "$tmp/err"; then
    echo "FAIL: tfc --dump=lower: want exit 2 and 'unknown stage'"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
