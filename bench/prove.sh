#!/usr/bin/env bash
# bench/prove.sh BIN_DIR [NAME...]: the validator's time per library program
# beside its compile time (issue 22), at -O: tfc --no-prove's (the compile
# alone), tfc's (which proves what it writes) and tfprove's wall-clock
# seconds, tfprove's CPU seconds (user + system: the figure to compare on a
# loaded machine; tfprove shares its attention heads among the CPUs online)
# and its verdict. Prints Markdown (bench/prove.md keeps the last run).
# BIN_DIR holds tfc and tfprove (a build directory will do); NAMEs:
# programs/NAME.tfp or a path to a .tfp (default: every library program).
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
# run CMD...: its wall and CPU seconds into $tmp/time ("wall cpu"), its exit code into rc.
run() {
  /usr/bin/time -f '%e %U %S' -o "$tmp/t" "$@" >"$tmp/out" 2>&1
  rc=$?
  tail -1 "$tmp/t" | awk '{printf "%.2f %.2f\n", $1, $2 + $3}' >"$tmp/time" # after time's "Command exited" line
}
echo "| program | tfc -O --no-prove (s) | tfc -O (s) | tfprove (s) | tfprove CPU (s) | verdict |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
for b in "${names[@]}"; do
  f=programs/$b.tfp
  [ -f "$b" ] && f=$b && b=$(basename "$b" .tfp)
  run "$bin/tfc" -O --no-prove "$f" -o "$tmp/m.tfw"
  tc=$(cut -d' ' -f1 "$tmp/time")
  run "$bin/tfc" -O "$f" -o "$tmp/p.tfw"
  tcp=$(cut -d' ' -f1 "$tmp/time")
  run timeout "${LIMIT:-300}" "$bin/tfprove" "$tmp/m.tfw"
  read -r tp cpu <"$tmp/time"
  if [ "$rc" -eq 124 ]; then v="over ${LIMIT:-300} s"; else
    v=$(grep -E ': (proven|not proven|NOT PROVEN)' "$tmp/out" | tail -1 | sed 's/^[^:]*: //' | cut -c1-90); fi
  printf '| %s | %s | %s | %s | %s | %s |\n' "$b" "$tc" "$tcp" "$tp" "$cpu" "$v"
done
