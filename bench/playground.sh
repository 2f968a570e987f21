#!/usr/bin/env bash
# bench/playground.sh [BUILD_DIR]: the playground's figures (issue 26,
# docs/playground.md), measured in one run, printed as Markdown
# (bench/playground.md keeps the last one):
#   - the size of everything tools/playground.sh puts in OUTDIR (limit 2 MB);
#   - the adder's compile time in the page after load (limit 100 ms): the
#     page's first Compile on ?example=adder, once its load (the warm-up,
#     web/app.js) is done, from the click to the result (round trip to the
#     worker) and inside the worker (tfc alone); then the median of 5 more;
#   - 10^5 adder cases (the first 10^5 of tools/adder_cases.py) checked in
#     the page (one worker per core) against native `tfrun --check` on the
#     same cases (one thread per core; BUILD_DIR's tfrun, default build/),
#     the page's first Check and the best of 3, native's best of 3
#     (limit: the page at least a third of native's speed).
# Headless Chromium on this machine, through tests/playground_driver.js.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve.sh"
build=$(cd "${1:-$root/build}" && pwd)
cmake --build "$build" -j"$(nproc)" --target tfc tfrun >/dev/null
tmp=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
export TMPDIR=$tmp

"$root/tools/playground.sh" --work "$build/playground" "$tmp/site" 2>/dev/null
size=$(du -sb "$tmp/site" | cut -f1)
wasm=$(stat -c %s "$tmp/site/tfc.wasm")

serve_static "$tmp/site" "$tmp/server.log" || { echo "bench/playground.sh: the web server did not start" >&2; exit 1; }

N=100000
PORT=$port N=$N python3 - >"$tmp/jobs.json" <<'PY'
import json, os
page = """(async () => {
  const ds = (id) => document.getElementById(id).dataset;
  const first = { compile: +ds("compile-time").ms,
    tfc: +document.getElementById("compile-time").textContent.match(/tfc: ([0-9.]+)/)[1],
    check: +ds("check-result").seconds, passed: +ds("check-result").passed,
    warm: +document.body.dataset.warmMs };
  const compiles = [];
  for (let i = 0; i < 5; i++) { await compile(); compiles.push(+ds("compile-time").ms); }
  const checks = [first.check];
  for (let i = 0; i < 2; i++) { await check(casesText()); checks.push(+ds("check-result").seconds); }
  return { first, compiles, checks, workers: navigator.hardwareConcurrency }; })()"""
url = f"http://127.0.0.1:{os.environ['PORT']}/index.html?example=adder&check={os.environ['N']}"
print(json.dumps([{"url": url, "timeout": 600, "eval": page}]))
PY
node "$root/tests/playground_driver.js" "$tmp/jobs.json" >"$tmp/page.json"

(cd "$root/programs" && "$build/tfc" adder.tfp -o "$tmp/adder.tfw")
python3 "$root/tools/adder_cases.py" 2>/dev/null | head -n $N >"$tmp/cases.tsv" || true
for i in 1 2 3; do
    "$build/tfrun" "$tmp/adder.tfw" --check "$tmp/cases.tsv" | sed -n 's/.* cases in \([0-9.]*\) s: .*/\1/p'
done >"$tmp/native.txt"

SIZE=$size WASM=$wasm N=$N TMPD=$tmp python3 - <<'PY'
import json, os, statistics
tmp, n = os.environ["TMPD"], int(os.environ["N"])
r = json.loads(open(f"{tmp}/page.json").readline())
if "error" in r:
    raise SystemExit("bench/playground.sh: the page: " + r["error"])
v = r["value"]
first = v["first"]
if first["passed"] != n:
    raise SystemExit(f"bench/playground.sh: the page passed {first['passed']} of {n} cases")
native = [float(x) for x in open(f"{tmp}/native.txt").read().split()]
size, wasm = int(os.environ["SIZE"]), int(os.environ["WASM"])
best_page, best_native = min(v["checks"]), min(native)
print("| figure | measured | limit |")
print("|---|---|---|")
print(f"| OUTDIR, all files | {size / 1e6:.2f} MB (tfc.wasm {wasm / 1e6:.2f} MB) | 2 MB |")
print(f"| page load's warm-up (web/app.js) | {first['warm']:.0f} ms | |")
print(f"| adder, first compile after load: click to result (tfc alone) | "
      f"{first['compile']:.1f} ms ({first['tfc']:.1f} ms) | 100 ms |")
print(f"| adder, median of 5 more compiles | {statistics.median(v['compiles']):.1f} ms | 100 ms |")
print(f"| 10^5 adder cases, page, first Check ({v['workers']} workers) | "
      f"{n / first['check']:.0f} cases/s ({first['check']:.2f} s) | |")
print(f"| 10^5 adder cases, page, best of 3 | {n / best_page:.0f} cases/s | |")
print(f"| 10^5 adder cases, native tfrun --check, best of 3 ({os.cpu_count()} threads) | "
      f"{n / best_native:.0f} cases/s | |")
print(f"| page / native (first Check; best of 3) | {best_native / first['check']:.2f}; "
      f"{best_native / best_page:.2f} | at least 0.33 |")
PY
