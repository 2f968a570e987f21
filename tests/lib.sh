# lib.sh: what the shell tests share. Sourced after `set -u`; gives SRC (the
# source tree), P (its programs), PY (the tests' Python: CMake passes one that
# can import torch), tmp (a folder removed on exit), check NAME STATUS (counts
# a pass or prints the failure), need_torch (fails the test when PY cannot
# import torch) and finish (the closing 'N passed, N failed' line and the
# status: failure when a check failed or none ran).
SRC=${TF_SOURCE_DIR:?TF_SOURCE_DIR must point at the source tree}
P=$SRC/programs
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
check() { # check NAME STATUS
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else echo "FAIL: $1"; failed=$((failed + 1)); fi
}
need_torch() {
    if ! "$PY" -c 'import torch' 2>"$tmp/err"; then
        echo "FAIL: $PY cannot import torch (install Debian's python3-torch): $(cat "$tmp/err")"
        exit 1
    fi
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
}
