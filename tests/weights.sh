#!/usr/bin/env bash
# weights.sh TFC: the library's weights have not changed. Every program in
# programs/*.tfp and bench/tracr/*.tfp is compiled at -O, -O0 and -O
# --no-schedule, and each weight file's digest (tests/weights_digest.py: the
# file's bytes, tfc's version stamp aside) must equal its line in
# tests/data/weights.sha256, made by the compiler of commit 7fde492 (see
# tests/data/README.md). A refactor of the compiler keeps every line; a change
# that means to change weights regenerates the list with UPDATE=1 and says so.
set -uo pipefail
TFC=$1
ROOT=${TF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
PY=${PYTHON:-python3}
LIST=$ROOT/tests/data/weights.sha256
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
version=$("$TFC" --version | awk 'NR == 1 {print $NF}')
failed=0
cd "$ROOT" || exit 1
for src in programs/*.tfp bench/tracr/*.tfp; do
    base=$(echo "${src%.tfp}" | tr / _)
    for level in O O0 no-schedule; do
        case $level in
        O) flags=(-O) ;;
        O0) flags=(-O0) ;;
        no-schedule) flags=(-O --no-schedule) ;;
        esac
        if ! "$TFC" "${flags[@]}" "$src" -o "$tmp/$base.$level.tfw" 2>"$tmp/err"; then
            echo "FAIL: tfc ${flags[*]} $src"
            cat "$tmp/err"
            failed=$((failed + 1))
        fi
    done
done
"$PY" "$ROOT/tests/weights_digest.py" "$version" "$tmp"/*.tfw | sort -k2 >"$tmp/got" || exit 1
if [ "${UPDATE:-0}" = 1 ]; then
    cp "$tmp/got" "$LIST"
    echo "wrote $(wc -l <"$LIST") digests to $LIST"
    exit 0
fi
if ! diff -u "$LIST" "$tmp/got"; then
    echo "FAIL: the weights above differ from tests/data/weights.sha256 (- expected, + now)"
    failed=$((failed + 1))
fi
n=$(wc -l <"$tmp/got")
echo "$n weight files compared, $failed failures"
[ "$failed" -eq 0 ] && [ "$n" -ge 150 ]
