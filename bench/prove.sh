#!/usr/bin/env bash
# bench/prove.sh BIN_DIR [NAME...]: the validator's time per library program
# beside its compile time (issue 22), at -O: tfc's and tfprove's wall-clock
# seconds (the best of REPS runs, default 1) and tfprove's verdict. Prints
# Markdown (bench/prove.md keeps the last run). BIN_DIR holds tfc and tfprove
# (a build directory will do); NAMEs: programs/NAME.tfp (default: all).
# A tfprove run is cut at LIMIT seconds (default 300): "over LIMIT s".
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bench/prove.sh BIN_DIR [NAME...]" >&2; exit 2; }
bin=$(cd "$1" && pwd)
shift
cd "$(dirname "$0")/.."
names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(ls programs/*.tfp | xargs -n1 basename | sed 's/\.tfp$//'))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
secs() { local s e; s=$(date +%s.%N); "$@" >"$tmp/out" 2>&1; rc=$?; e=$(date +%s.%N); echo "$e - $s" | bc; }
echo "| program | tfc -O (s) | tfprove (s) | verdict |"
echo "| --- | ---: | ---: | --- |"
for b in "${names[@]}"; do
  tc=$(secs "$bin/tfc" -O "programs/$b.tfp" -o "$tmp/m.tfw")
  tp=$(secs timeout "${LIMIT:-300}" "$bin/tfprove" "$tmp/m.tfw")
  if [ "$rc" -eq 124 ]; then v="over ${LIMIT:-300} s"; else
    v=$(grep -E ': (proven|not proven|NOT PROVEN)' "$tmp/out" | tail -1 | sed 's/^[^:]*: //' | cut -c1-90); fi
  printf '| %s | %.2f | %.2f | %s |\n' "$b" "$tc" "$tp" "$v"
done
