#!/usr/bin/env bash
# diagnostics.sh TFC TFRUN: golden diagnostics. For each
# tests/diagnostics/NAME.tfp, `tfc NAME.tfp` (run inside that folder, so
# messages name the bare file) must exit 1 and print exactly NAME.err.
# Run with UPDATE=1 to rewrite the .err files (then review the diff).
set -u
TFC=$1
cd "$(dirname "$0")/diagnostics" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
for src in *.tfp; do
    name=${src%.tfp}
    rm -f "$tmp/out.tfw"
    "$TFC" "$src" -o "$tmp/out.tfw" 2>"$tmp/stderr" >/dev/null
    status=$?
    if [ "${UPDATE:-0}" = 1 ]; then cp "$tmp/stderr" "$name.err"; fi
    if [ "$status" -ne 1 ]; then
        echo "FAIL: $src: exit status $status, want 1"
        failed=$((failed + 1))
    elif ! diff -u "$name.err" "$tmp/stderr" >"$tmp/diff"; then
        echo "FAIL: $src: diagnostics differ from $name.err"
        cat "$tmp/diff"
        failed=$((failed + 1))
    elif [ -e "$tmp/out.tfw" ]; then
        echo "FAIL: $src: a weight file was written despite errors"
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
