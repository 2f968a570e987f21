#!/usr/bin/env bash
# playground.sh TFC TFRUN TFINFO: the playground (tools/playground.sh, web/)
# in Debian's headless Chromium, against the native tools.
#
# Builds the site, serves it on 127.0.0.1 (python3 -m http.server) and opens
# it through tests/playground_driver.js:
#   - every library program (programs/*.tfp) compiled and run in the page
#     prints what `tfrun NAME.tfw P` prints, and the page's .tfw has the
#     bytes of `tfc NAME.tfp` (two of them from their URL,
#     ?example=NAME&prompt=P, then all of them picked in one page);
#   - every program of tests/diagnostics shows exactly the diagnostics
#     `tfc program.tfp` prints, and no model (the first given as ?source=,
#     then all of them typed into that page and compiled);
#   - the adder's trace is `tfrun --trace`'s, its report has pictures;
#     Check passes generated cases and shows tfrun --check's failures;
#     a .tfw opened in the page shows what tfinfo prints.
# With --screenshots DIR, it also writes the pictures of docs/playground.md
# there. Skipped (exit 77) only when emcc is not installed; a missing
# Chromium, node or python3 is a failure.
set -u
abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
TFC=$(abspath "$1") TFRUN=$(abspath "$2") TFINFO=$(abspath "$3")
shift 3
shots=""
[ "${1:-}" = "--screenshots" ] && shots=$(mkdir -p "$2" && cd "$2" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve.sh"
if ! command -v emcc >/dev/null; then
    echo "SKIP: emcc not found (apt-get install emscripten): the playground cannot be built"
    exit 77
fi
for tool in node python3 "${CHROMIUM:-chromium}"; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool not found"; exit 1; }
done
tmp=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
export TMPDIR=$tmp # Chromium's profile, removed with the rest

site="$tmp/site"
if ! "$root/tools/playground.sh" --work "$(dirname "$TFC")/playground" "$site" >"$tmp/build.log" 2>&1; then
    echo "FAIL: tools/playground.sh"
    cat "$tmp/build.log"
    exit 1
fi

serve_static "$site" "$tmp/server.log" || { echo "FAIL: the web server did not start"; cat "$tmp/server.log"; exit 1; }
base="http://127.0.0.1:$port/index.html"

# A prompt for each library program.
cat >"$tmp/prompts.tsv" <<'PROMPTS'
add10	^9999999999+0000000001=
add_binary	^10110011+01100101=
add_decimal	^12345678+87654329=
add_decimal16	^9999999999999999+0000000000000001=
adder	0999+0111=
balance	^(()))(
binary_add	01100100+00000111=
binary_add_msb	101+011=
count_token	^abca
decimal_add	123+456=
double_histogram	^aabbc
dyck1	^(()))(
dyck2	^({})}(
dyck3	^([]{})]
first_token	31244123412341234123
frac_prevs	^abca
frac_prevs_mean	^abca
histogram	^abcab
histogram_student	^abcab
length	^abba
most_freq	^dcadcb
mul_digit	^7*14285714=
pair_balance	^(()))(
pattern	^abcabc
prefix_sum	^12345
reverse	^abcc
secret_code	#2013
shift	^abcab
shuffle_dyck2	^({)}}
sort	^dcadcb
sort_case	^aBcD
sort_freq	^dcadcb
sort_student	^dcadcb
wordplay	^ ab cba BA abc
words	^ the cat sat on the mat
xor	0abcd1
PROMPTS
failed=0
fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

# ---- the native side -------------------------------------------------------
mkdir -p "$tmp/native" "$tmp/diag"
for src in "$root"/programs/*.tfp; do
    name=$(basename "$src" .tfp)
    grep -q "^$name	" "$tmp/prompts.tsv" || fail "programs/$name.tfp has no prompt in tests/playground.sh"
done
while IFS=$'\t' read -r name prompt; do
    [ -f "$root/programs/$name.tfp" ] || { fail "no programs/$name.tfp"; continue; }
    (cd "$root/programs" && "$TFC" "$name.tfp" -o "$tmp/native/$name.tfw" 2>"$tmp/native/$name.err") ||
        fail "tfc $name.tfp"
    "$TFRUN" "$tmp/native/$name.tfw" -- "$prompt" >"$tmp/native/$name.out" 2>&1
done <"$tmp/prompts.tsv"
for src in "$root"/tests/diagnostics/*.tfp; do
    name=$(basename "$src" .tfp)
    mkdir -p "$tmp/diag/$name"
    cp "$src" "$tmp/diag/$name/program.tfp"
    (cd "$tmp/diag/$name" && "$TFC" program.tfp -o out.tfw 2>stderr >/dev/null)
done
"$TFRUN" "$tmp/native/adder.tfw" --trace -- "0999+0111=" >"$tmp/native/adder.trace"
printf '0999+0111=\t0111\n0999+0111=\t9999\n0001+0001=\t1000\n' >"$tmp/cases.tsv"
"$TFRUN" "$tmp/native/adder.tfw" --check "$tmp/cases.tsv" --threads 1 >"$tmp/native/check.out"
cp "$tmp/native/sort.tfw" "$tmp/model.tfw"
(cd "$tmp" && "$TFINFO" model.tfw >"$tmp/native/sort.info")

# ---- the page --------------------------------------------------------------
# What each job reads back: the output, the diagnostics, the model's sha256.
STATE='(async () => { const t = (id) => document.getElementById(id).textContent;
  let sha = null;
  if (tfw) sha = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", tfw)))
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  return { output: t("output"), diagnostics: t("diagnostics"), sha, trace: t("trace"),
           report: document.getElementById("report").srcdoc, info: t("info"),
           check: t("check-result"), status: t("status") }; })()'
STATE="$STATE" TMPD="$tmp" BASE="$base" SHOTS="$shots" python3 - <<'PY'
import json, os, glob, urllib.parse as up
tmp, base, state, shots = os.environ["TMPD"], os.environ["BASE"], os.environ["STATE"], os.environ["SHOTS"]
jobs = []
# The programs: the adder and one learned model from their URLs, then all of
# them picked, compiled and run in one page (a page load per program would
# double the test's time).
prompts = dict(line.rstrip("\n").split("\t") for line in open(f"{tmp}/prompts.tsv"))
for name in ["adder", "xor"]:
    jobs.append({"key": f"program {name}", "eval": state,
                 "url": f"{base}?warm=0&example={name}&prompt={up.quote(prompts[name], safe='')}"})
jobs.append({"key": "program", "url": f"{base}?warm=0",
             "eval": "(async () => { const out = {}; const sel = document.getElementById('examples');"
                     " for (const [name, prompt] of Object.entries(%s)) {"
                     " sel.value = name; sel.dispatchEvent(new Event('change'));"
                     " while (document.getElementById('source').value !== await loadExample(name))"
                     " await new Promise((r) => setTimeout(r, 20));"
                     " document.getElementById('prompt').value = prompt;"
                     " if (await compile()) await run(); out[name] = await %s; } return out; })()"
                     % (json.dumps(prompts), state)})
# The diagnostics: the first from its URL, all of them in that page.
paths = sorted(glob.glob(f"{tmp}/diag/*/program.tfp"))
# (A program that is not UTF-8, syn_utf8's invalid bytes, cannot be typed into
# the page's editor: tests/diagnostics.sh checks it natively.)
sources = {}
for p in paths:
    try:
        sources[p.split("/")[-2]] = open(p, "rb").read().decode("utf-8")
    except UnicodeDecodeError:
        pass
first = next(iter(sources))
jobs.append({"key": f"diagnostics {first}", "eval": state,
             "url": f"{base}?warm=0&source={up.quote(sources[first], safe='')}"})
jobs.append({"key": "diagnostics", "url": f"{base}?warm=0&source={up.quote(sources[first], safe='')}",
             "eval": "(async () => { const out = {}; for (const [name, text] of Object.entries(%s)) {"
                     " document.getElementById('source').value = text; await compile();"
                     " out[name] = await %s; } return out; })()" % (json.dumps(sources), state)})
# Check: 2000 generated cases pass; three cases of which two fail.
jobs.append({"key": "check 2000", "eval": state, "url": f"{base}?warm=0&example=adder&check=2000"})
cases = open(f"{tmp}/cases.tsv").read()
jobs.append({"key": "check failures", "url": f"{base}?warm=0&example=adder",
             "eval": "(async () => { setGenerated(%s); await check(casesText()); return %s; })()"
                     % (json.dumps(cases), state)})
# Open a .tfw.
jobs.append({"key": "open", "url": f"{base}?warm=0&example=adder",
             "upload": {"selector": "#open", "path": f"{tmp}/model.tfw"},
             "eval": "(async () => { while (!/opened|cannot/.test(document.getElementById('status')"
                     ".textContent)) await new Promise((r) => setTimeout(r, 50)); return %s; })()" % state})
if shots:
    bad = "vocab \"ab\";\ntoken t;\n\nrepeat 2 {\n    c: Clear(t);\n}\noutput u;\n"
    jobs.append({"key": "shot diagnostic", "url": f"{base}?warm=0&source={up.quote(bad, safe='')}",
                 "screenshot": f"{shots}/diagnostic.png", "shot": "#program", "width": 1000, "height": 700,
                 "eval": "(async () => { document.getElementById('source').scrollTop = 0; })()"})
    jobs.append({"key": "shot trace", "url": f"{base}?warm=0&example=adder&prompt=0999%2B0111%3D",
                 "screenshot": f"{shots}/trace.png", "shot": "#trace-box", "width": 1000})
    jobs.append({"key": "shot report", "url": f"{base}?warm=0&example=adder&prompt=0999%2B0111%3D",
                 "screenshot": f"{shots}/report.png", "shot": "#report-box", "width": 1000,
                 "eval": "new Promise((r) => setTimeout(r, 1500))"})
json.dump(jobs, open(f"{tmp}/jobs.json", "w"))
PY
node "$root/tests/playground_driver.js" "$tmp/jobs.json" >"$tmp/results.jsonl" 2>"$tmp/driver.err" ||
    { echo "note: the driver reported errors"; cat "$tmp/driver.err"; }

TMPD="$tmp" python3 - <<'PY' || failed=$((failed + 1))
import json, os, hashlib, sys
tmp = os.environ["TMPD"]
jobs = json.load(open(f"{tmp}/jobs.json"))
results = [json.loads(l) for l in open(f"{tmp}/results.jsonl")]
bad = 0
def fail(msg):
    global bad
    bad += 1
    print("FAIL:", msg)
if len(results) != len(jobs):
    fail(f"{len(results)} results for {len(jobs)} jobs")
ok_prog, n_diag = set(), 0

def trace_differs(got, want):
    """None when the traces agree: the same lines and words, and numbers
    within 1e-3 + 1e-4 |x|. The page's matrix products (web/cblas.c) add in
    another order than OpenBLAS; registers like the adder's `distance` are
    differences of terms up to period^2 = 10^4, where float32 rounding is
    about 10^4 * 6e-8 = 6e-4."""
    g, w = got.split("\n"), want.split("\n")
    if len(g) != len(w):
        return f"{len(g)} lines, tfrun {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        wa, wb = a.split(), b.split()
        if len(wa) != len(wb):
            return f"line {i + 1}: {a!r} vs {b!r}"
        for x, y in zip(wa, wb):
            if x == y:
                continue
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                return f"line {i + 1}: {x!r} vs {y!r}"
            if abs(fx - fy) > 1e-3 + 1e-4 * abs(fy):
                return f"line {i + 1}: {fx} vs {fy}"
    return None
for job, res in zip(jobs, results):
    key = job["key"]
    if "error" in res:
        fail(f"{key}: {res['error']}")
        continue
    v = res.get("value")
    kind, _, name = key.partition(" ")
    if kind == "program":
        for name, v in ({name: v} if name else v).items():
            want = open(f"{tmp}/native/{name}.out").read()
            sha = hashlib.sha256(open(f"{tmp}/native/{name}.tfw", "rb").read()).hexdigest()
            if v["output"] != want:
                fail(f"{name}: the page printed {v['output']!r}, tfrun {want!r}")
            elif v["sha"] != sha:
                fail(f"{name}: the page's .tfw differs from tfc's (sha256 {v['sha']} vs {sha})")
            elif v["diagnostics"] != open(f"{tmp}/native/{name}.err").read():
                fail(f"{name}: the page's warnings differ from tfc's: {v['diagnostics']!r}")
            else:
                ok_prog.add(name)
            if name == "adder":
                why = trace_differs(v["trace"], open(f"{tmp}/native/adder.trace").read())
                if why:
                    fail(f"adder: the page's trace differs from tfrun --trace: {why}")
                if "<svg" not in v["report"] or "tf-data" not in v["report"]:
                    fail("adder: the page's report has no pictures")
    elif kind == "diagnostics":
        for name, d in ({name: v} if name else v).items():
            want = open(f"{tmp}/diag/{name}/stderr").read()
            if d["diagnostics"] != want:
                fail(f"{name}: the page showed\n{d['diagnostics']}\ntfc printed\n{want}")
            elif d["sha"] is not None or not want:
                fail(f"{name}: a model after errors, or no diagnostics at all")
            else:
                n_diag += 1
    elif key == "check 2000":
        if not v["check"].startswith("2000 passed, 0 failed ("):
            fail(f"check: {v['check']!r}")
    elif key == "check failures":
        want = open(f"{tmp}/native/check.out").read().split("\n")
        want = "\n".join(want[:want.index(next(l for l in want if " passed, " in l))])
        got = v["check"]
        if not got.startswith(want + "\n1 passed, 2 failed (") or "line 3" not in want:
            fail(f"check failures: the page showed\n{got}\ntfrun --check printed\n{want}")
    elif key == "open":
        if v["info"] != open(f"{tmp}/native/sort.info").read() or v["diagnostics"]:
            fail(f"open: the page's tfinfo {v['info'][:200]!r}, diagnostics {v['diagnostics']!r}")
n_all = len(open(f"{tmp}/prompts.tsv").readlines())
print(f"{len(ok_prog)} of {n_all} programs and {n_diag} diagnostics as the native tools, {bad} failures")
sys.exit(1 if bad or len(ok_prog) != n_all or n_diag == 0 else 0)
PY
[ "$failed" -eq 0 ]
