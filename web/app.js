// app.js: the playground's page (web/index.html). Everything the tools do
// runs in web workers (worker.js): one for compiling and running, and for
// Check one per core, each checking a share of the cases.
//
// Driven by the URL, for links and tests:
//   index.html?example=adder&prompt=0999%2B0111%3D   compile programs/adder.tfp, run the prompt
//   index.html?source=PROGRAM TEXT&prompt=...         the same with the program in the URL
//   ...&check=N                                       then generate N adder cases and check them
//   ...&warm=0                                        no warm-up while loading (faster for tests)
// The result line goes into #output, tfc's diagnostics into #diagnostics,
// the check's summary into #check-result; <body data-state> ends "done".
"use strict";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

// ---- workers ---------------------------------------------------------------

// tfc.wasm, compiled once for every worker (worker.js says why).
// (compileStreaming needs the server to send application/wasm; otherwise the bytes.)
const compileWasm = () =>
  fetch("tfc.wasm").then((r) => r.arrayBuffer()).then((b) => WebAssembly.compile(b));
const wasmModule = WebAssembly.compileStreaming
  ? WebAssembly.compileStreaming(fetch("tfc.wasm")).catch(compileWasm)
  : compileWasm();

// A worker and its pending requests: call(msg, onProgress) -> Promise(reply).
function makeWorker() {
  const w = new Worker("worker.js");
  wasmModule.then((module) => w.postMessage({ module }));
  const pending = new Map();
  let next = 1;
  w.onmessage = (e) => {
    const p = pending.get(e.data.id);
    if (!p) return;
    if (!e.data.done) {
      if (p.onProgress) p.onProgress(e.data.progress);
      return;
    }
    pending.delete(e.data.id);
    if (e.data.error) p.reject(new Error(e.data.error));
    else p.resolve(e.data);
  };
  w.onerror = (e) => {
    for (const p of pending.values()) p.reject(new Error(e.message || "the worker stopped"));
    pending.clear();
  };
  return {
    call(msg, onProgress) {
      const id = next++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject, onProgress });
        w.postMessage(Object.assign({ id }, msg));
      });
    },
  };
}

const main = makeWorker();
// The checkers: made for the warm-up, or on the first Check.
let checkers = [];
function getCheckers() {
  if (!checkers.length)
    checkers = Array.from({ length: Math.max(1, Math.min(navigator.hardwareConcurrency || 2, 8)) },
      () => makeWorker());
  return checkers;
}

// ---- state -----------------------------------------------------------------

let tfw = null;        // the current model's bytes (compiled or opened)
let tfwName = "program.tfw";
let programName = "program";

function setStatus(text) {
  $("status").textContent = text;
}

function setModel(bytes, name) {
  tfw = bytes;
  tfwName = name;
  $("download").disabled = $("run").disabled = $("check").disabled = !bytes;
}

// ---- the editor: syntax colouring ------------------------------------------

const KEYWORDS = new Set(["vocab", "period", "position", "token", "scalar", "output", "generate",
  "repeat", "model", "cat", "num", "bos", "maxlen", "until", "and", "or", "not", "true", "false",
  "at", "every", "predict", "classes"]);

function escapeHtml(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

// Lines (1-based) that tfc's diagnostics point at, underlined in the editor.
let errorLines = new Set();

function highlightLine(line) {
  const re = /(#.*$)|('(?:[^'\\\n]|\\.)*'?|"(?:[^"\\\n]|\\.)*"?)|([A-Za-z_][A-Za-z0-9_]*)(\s*[:(])?|(\d+(?:\.\d+)?)/g;
  let out = "", last = 0, m;
  while ((m = re.exec(line))) {
    out += escapeHtml(line.slice(last, m.index));
    last = re.lastIndex;
    const text = escapeHtml(m[0]);
    if (m[1]) out += `<span class="t-comment">${text}</span>`;
    else if (m[2]) out += `<span class="t-string">${text}</span>`;
    else if (m[3]) {
      const word = escapeHtml(m[3]), after = m[4] ? escapeHtml(m[4]) : "";
      let cls = KEYWORDS.has(m[3]) ? "t-keyword" : "";
      if (!cls && m[4] && m[4].trim() === "(" && /^[A-Z]/.test(m[3])) cls = "t-op";
      if (!cls && m[4] && m[4].trim() === ":" && !/^\s*:/.test(line.slice(re.lastIndex)))
        cls = line.slice(0, m.index).trim() === "" ? "t-label" : "";
      out += (cls ? `<span class="${cls}">${word}</span>` : word) + after;
    } else out += `<span class="t-number">${text}</span>`;
  }
  return out + escapeHtml(line.slice(last));
}

function renderHighlight() {
  const lines = $("source").value.split("\n");
  $("highlight").innerHTML = lines
    .map((l, i) => {
      const h = highlightLine(l);
      return errorLines.has(i + 1) ? `<span class="t-error">${h || " "}</span>` : h;
    })
    .join("\n") + "\n";
  syncScroll();
}

function syncScroll() {
  $("highlight").scrollTop = $("source").scrollTop;
  $("highlight").scrollLeft = $("source").scrollLeft;
}

$("source").addEventListener("input", () => {
  errorLines = new Set();
  renderHighlight();
});
$("source").addEventListener("scroll", syncScroll);

// ---- programs --------------------------------------------------------------

async function loadExample(name) {
  const r = await fetch(`programs/${encodeURIComponent(name)}.tfp`);
  if (!r.ok) throw new Error(`no program '${name}' in the library`);
  return r.text();
}

async function listExamples() {
  const r = await fetch("programs/index.txt");
  const names = (await r.text()).split("\n").filter(Boolean);
  const sel = $("examples");
  sel.innerHTML = `<option value="">(your own)</option>` +
    names.map((n) => `<option>${escapeHtml(n)}</option>`).join("");
  sel.addEventListener("change", async () => {
    if (!sel.value) return;
    programName = sel.value;
    $("source").value = await loadExample(sel.value);
    errorLines = new Set();
    renderHighlight();
  });
}

// A prompt to start from: the line in the program's header comment that
// shows one ("0999+0111= -> 0111", or quoted: "^ the cat" -> ...), else nothing.
function examplePrompt(source) {
  const m = source.match(/^#.*?(\S+)\s*->/m);
  if (!m) return "";
  let p = m[1];
  if (p.endsWith('"') && !p.startsWith('"')) { // a quoted prompt of words: "^ the cat" ->
    const close = m[0].lastIndexOf('"'), open = m[0].lastIndexOf('"', close - 1);
    if (open >= 0) p = m[0].slice(open, close + 1);
  }
  return p.replace(/^"|"$/g, "");
}

// ---- compile, run, open, download ------------------------------------------

async function compile() {
  $("diagnostics").textContent = "";
  $("info").textContent = "";
  setStatus("compiling…");
  const t0 = performance.now();
  const r = await main.call({ cmd: "compile", name: programName, source: $("source").value });
  const ms = performance.now() - t0;
  $("diagnostics").textContent = r.stderr;
  errorLines = new Set([...r.stderr.matchAll(/^[^:\n]+\.tfp:(\d+):\d+: error/gm)].map((m) => +m[1]));
  renderHighlight();
  if (r.rc !== 0) {
    setModel(null, "");
    $("size").textContent = "";
    $("compile-time").textContent = "";
    setStatus(r.rc === 1 ? "the program has errors" : "tfc failed");
    return false;
  }
  setModel(r.tfw, programName + ".tfw");
  $("size").textContent = r.stdout.split("\n")[0].replace(/^[^:]*: /, "");
  $("compile-time").textContent = `compiled in ${ms.toFixed(1)} ms (tfc: ${r.ms.toFixed(1)} ms)`;
  $("compile-time").dataset.ms = ms.toFixed(3);
  setStatus(`compiled: ${r.tfw.length} bytes`);
  return true;
}

async function run() {
  if (!tfw) return;
  setStatus("running…");
  const r = await main.call({ cmd: "run", tfw, prompt: $("prompt").value });
  $("output").textContent = r.rc === 0 ? r.stdout : r.stderr;
  $("output").classList.toggle("diag", r.rc !== 0);
  $("trace").textContent = r.trace || "";
  $("report").srcdoc = r.report || "";
  setStatus(r.rc === 0 ? "ran" : "the prompt failed");
}

$("compile").addEventListener("click", () => compile().catch(showError));
$("run").addEventListener("click", () => run().catch(showError));
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter") run().catch(showError);
});

$("download").addEventListener("click", () => {
  if (!tfw) return;
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([tfw], { type: "application/octet-stream" }));
  a.download = tfwName;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
});

$("open").addEventListener("change", async () => {
  const f = $("open").files[0];
  if (!f) return;
  const bytes = new Uint8Array(await f.arrayBuffer());
  const r = await main.call({ cmd: "info", tfw: bytes });
  $("diagnostics").textContent = r.rc === 0 ? "" : r.stderr;
  $("info").textContent = r.stdout;
  setModel(r.rc === 0 ? bytes : null, f.name);
  $("size").textContent = r.rc === 0 ? `${f.name}: ${bytes.length} bytes` : "";
  setStatus(r.rc === 0 ? `opened ${f.name}` : `cannot open ${f.name}`);
});

// ---- check -----------------------------------------------------------------

// The first n cases of tools/adder_cases.py: a + b for a, b in 0..999,
// 4 digits each, the sum's digits least-significant first.
function adderCases(n) {
  const pad = (x) => String(x).padStart(4, "0");
  const lines = [];
  for (let a = 0; a < 1000 && lines.length < n; a++)
    for (let b = 0; b < 1000 && lines.length < n; b++)
      lines.push(`${pad(a)}+${pad(b)}=\t${pad(a + b).split("").reverse().join("")}`);
  return lines.join("\n") + "\n";
}

// Generated cases are kept here, and the text area shows their first lines
// only (laying out 10^5 lines would hold the page up for seconds); editing
// the text area drops them.
let generated = null;
const PREVIEW_LINES = 200;

function setGenerated(text) {
  generated = text;
  const lines = text.split("\n", PREVIEW_LINES + 1);
  $("cases").value = lines.length > PREVIEW_LINES
    ? lines.slice(0, PREVIEW_LINES).join("\n") + "\n…" : text;
  $("cases").readOnly = lines.length > PREVIEW_LINES;
}

function casesText() {
  return generated !== null ? generated : $("cases").value;
}

$("cases").addEventListener("focus", () => {
  if ($("cases").readOnly) {
    $("cases").readOnly = false;
    $("cases").value = "";
    generated = null;
  }
});
$("cases").addEventListener("input", () => (generated = null));

$("generate").addEventListener("click", () => {
  setGenerated(adderCases(Math.max(1, parseInt($("gen-count").value, 10) || 1000)));
});

const SHOW_FAILURES = 10;

// Splits the cases over the checkers; returns the summary, as tfrun --check's.
async function check(casesText) {
  if (!tfw) return "";
  const lines = casesText.split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  const n = getCheckers().length, total = lines.length;
  const runs = new Array(n).fill(0);
  $("check-progress").value = 0;
  $("check-result").textContent = "";
  setStatus("checking…");
  const t0 = performance.now();
  const shares = checkers.map((w, k) => {
    const lo = Math.floor((k * total) / n), hi = Math.floor(((k + 1) * total) / n);
    const cases = lines.slice(lo, hi).join("\n") + (hi > lo ? "\n" : "");
    return w.call({ cmd: "check", tfw, cases, firstLine: lo + 1, showFailures: SHOW_FAILURES },
      (p) => {
        runs[k] = p.run;
        $("check-progress").value = runs.reduce((a, b) => a + b, 0) / Math.max(1, total);
      });
  });
  const rs = await Promise.all(shares);
  const seconds = (performance.now() - t0) / 1000;
  $("check-progress").value = 1;
  const sum = (f) => rs.reduce((a, r) => a + r[f], 0);
  const failures = rs.map((r) => r.stdout).join("").split(/\n(?=\S)/).filter(Boolean);
  const errors = rs.map((r) => r.stderr).join("");
  const passed = sum("passed"), failed = sum("failed"), bad = sum("bad"), run = sum("run");
  let text = failures.slice(0, SHOW_FAILURES).join("\n");
  if (text && !text.endsWith("\n")) text += "\n";
  if (failed > SHOW_FAILURES) text += `... and ${failed - SHOW_FAILURES} more failures\n`;
  text += `${passed} passed, ${failed} failed` + (bad ? `, ${bad} bad lines` : "") +
    ` (${run} cases in ${seconds.toFixed(2)} s: ${(run / seconds).toFixed(0)} cases/s, ` +
    `${n} worker${n === 1 ? "" : "s"}, batch size 256)\n`;
  $("check-result").textContent = errors + text;
  $("check-result").dataset.seconds = seconds.toFixed(4);
  $("check-result").dataset.passed = passed;
  $("check-result").dataset.failed = failed;
  setStatus(failed || bad ? "some cases failed" : "every case passed");
  return text;
}

$("check").addEventListener("click", () => check(casesText()).catch(showError));

function showError(e) {
  setStatus("error: " + e.message);
  $("diagnostics").textContent += (e.message || String(e)) + "\n";
}

// While the page loads, every worker compiles programs other than the adder
// and checks each on its prompt: WebAssembly starts in the browser's
// baseline compiler and is optimized once it runs hot, so the first Compile
// and Check would otherwise run several times slower (and the adder's
// figures in bench/playground.sh would measure a warm-up on itself).
const WARM_UP = ["mul_digit", "sort", "histogram", "dyck2"];
const WARM_UP_CASES = 1000;

// ---- start: from the URL ---------------------------------------------------

async function start() {
  await listExamples();
  let source = params.get("source");
  const example = params.get("example") || (source === null ? "adder" : "");
  if (source === null) {
    source = await loadExample(example);
    $("examples").value = example;
    programName = example;
  }
  $("source").value = source;
  renderHighlight();
  $("prompt").value = params.has("prompt") ? params.get("prompt") : examplePrompt(source);
  // Programs other than the adder, so that its first compile is not the
  // measure of a warm-up on itself (bench/playground.sh).
  setStatus("warming up…");
  const t0 = performance.now();
  if (params.get("warm") !== "0") {
    const programs = (await Promise.all(WARM_UP.map(loadExample)))
      .map((source) => ({ source, prompt: examplePrompt(source) }));
    await Promise.all([main, ...getCheckers()].map((w) =>
      w.call({ cmd: "warm", programs, cases: WARM_UP_CASES })));
  }
  document.body.dataset.warmMs = (performance.now() - t0).toFixed(1);
  $("compile").disabled = false;
  setStatus("ready");
  if (params.has("example") || params.has("source")) {
    if ((await compile()) && params.has("prompt")) await run();
    if (tfw && params.has("check")) {
      setGenerated(adderCases(parseInt(params.get("check"), 10) || 1000));
      await check(casesText());
    }
  }
}

start()
  .catch(showError)
  .finally(() => (document.body.dataset.state = "done"));
