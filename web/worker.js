// worker.js: the page's compiler and runtime, off the main thread.
//
// Loads tfc.js (tfc, tfrun and tfinfo compiled to WebAssembly: web/tf_web.c)
// and answers the page's messages, one at a time, each {id, cmd, ...}:
//   compile {name, source}      -> tfc -v NAME.tfp: {rc, stdout, stderr, ms, tfw}
//   run     {tfw, prompt}       -> tfrun, tfrun --trace, tfrun --report:
//                                  {rc, stdout, stderr, trace, report}
//   info    {tfw}               -> tfinfo: {rc, stdout, stderr}
//   warm    {programs: [{source, prompt}], cases}
//                               -> compiles these programs and checks each
//                                  on its prompt, cases times, then forgets
//                                  them: {ms}. WebAssembly code starts
//                                  in the browser's baseline compiler and is
//                                  optimized once it runs hot; the page warms
//                                  the compiler up while it loads.
//   check   {tfw, cases, firstLine, showFailures}
//                               -> tfrun --check on this share of the cases:
//                                  {rc, stdout, stderr, run, passed, failed,
//                                   bad, seconds}, with {progress} messages
// Files live in the module's memory file system, in /w (the working
// directory, so diagnostics name NAME.tfp as tfc run beside it would).
"use strict";
importScripts("tfc.js");

const CHECK_PIECE = 4096;

// The page compiles tfc.wasm once and sends every worker the same
// WebAssembly.Module (its first message, {module}): the browser then keeps
// one copy of the code, and the optimized code that one worker's hot loops
// earn serves them all.
let M = null;
let gotModule;
const wasmModule = new Promise((resolve) => (gotModule = resolve));
const ready = wasmModule.then((module) =>
  createTfc({
    instantiateWasm(imports, done) {
      WebAssembly.instantiate(module, imports).then((instance) => done(instance, module));
      return {};
    },
  }).then((m) => {
    M = m;
    M.FS.mkdir("/w");
    M.FS.chdir("/w");
  }));

function readText(path) {
  try {
    return M.FS.readFile(path, { encoding: "utf8" });
  } catch (e) {
    return "";
  }
}

function remove(path) {
  try {
    M.FS.unlink(path);
  } catch (e) {
    /* not there */
  }
}

// One of the tools, as if run in a shell: its status and what it printed.
function tool(name, args) {
  const rc = M.ccall("web_tool", "number", ["string", "string"], [name, args.join("\x1f")]);
  return { rc, stdout: readText("/tmp/stdout"), stderr: readText("/tmp/stderr") };
}

function handle(msg) {
  switch (msg.cmd) {
    case "compile": {
      const src = msg.name + ".tfp", out = msg.name + ".tfw";
      M.FS.writeFile(src, msg.source);
      remove(out);
      const t0 = performance.now();
      const r = tool("tfc", ["-v", src, "-o", out]);
      r.ms = performance.now() - t0;
      if (r.rc === 0) r.tfw = M.FS.readFile(out);
      remove(out);
      return r;
    }
    case "run": {
      M.FS.writeFile("model.tfw", msg.tfw);
      const r = tool("tfrun", ["model.tfw", "--", msg.prompt]);
      if (r.rc === 0) {
        r.trace = tool("tfrun", ["model.tfw", "--trace", "--", msg.prompt]).stdout;
        remove("report.html");
        const rep = tool("tfrun", ["model.tfw", "--report", "report.html", "--", msg.prompt]);
        r.report = rep.rc === 0 ? readText("report.html") : "";
      }
      return r;
    }
    case "info": {
      M.FS.writeFile("model.tfw", msg.tfw);
      return tool("tfinfo", ["model.tfw"]);
    }
    case "check": {
      // In pieces of CHECK_PIECE lines, one web_check call each: a running
      // WebAssembly function keeps the code it started in (V8 replaces a
      // function's baseline code by optimized code only for later calls), so
      // one call for all the cases would run runner_run's own loop in
      // baseline code to the end; between pieces the optimized code comes in.
      M.FS.writeFile("check.tfw", msg.tfw);
      const lines = msg.cases.split("\n");
      if (lines.length && lines[lines.length - 1] === "") lines.pop();
      const stat = (i) => M.ccall("web_check_stat", "number", ["number"], [i]);
      const r = { rc: 0, stdout: "", stderr: "", run: 0, passed: 0, failed: 0, bad: 0, seconds: 0 };
      for (let lo = 0; lo < lines.length && r.rc === 0; lo += CHECK_PIECE) {
        const piece = lines.slice(lo, lo + CHECK_PIECE);
        M.FS.writeFile("cases.tsv", piece.join("\n") + "\n");
        const done = r.run;
        M.onCheckProgress = (run, failed) =>
          postMessage({ id: msg.id, progress: { run: done + run, failed: r.failed + failed } });
        r.rc = M.ccall("web_check", "number",
                       ["string", "string", "number", "number", "number", "number"],
                       ["check.tfw", "cases.tsv", msg.firstLine + lo, -1, 256,
                        Math.max(0, msg.showFailures - r.failed)]);
        r.stdout += readText("/tmp/stdout");
        r.stderr += readText("/tmp/stderr");
        r.run += stat(0);
        r.passed += stat(1);
        r.failed += stat(2);
        r.bad += stat(3);
        r.seconds += stat(4);
        postMessage({ id: msg.id, progress: { run: r.run, failed: r.failed } });
      }
      M.onCheckProgress = null;
      remove("cases.tsv");
      return r;
    }
    case "warm": {
      const t0 = performance.now();
      msg.programs.forEach(({ source, prompt }) => {
        M.FS.writeFile("warm.tfp", source);
        if (tool("tfc", ["warm.tfp", "-o", "warm.tfw"]).rc === 0 && prompt) {
          // The engine too: the program on its prompt, as --check cases
          // (whose expected text does not matter).
          M.FS.writeFile("warm.tsv", (prompt + "\t?\n").repeat(msg.cases));
          M.ccall("web_check", "number", ["string", "string", "number", "number", "number", "number"],
                  ["warm.tfw", "warm.tsv", 1, -1, 256, 0]);
        }
      });
      ["warm.tfp", "warm.tfw", "warm.tsv"].forEach(remove);
      return { ms: performance.now() - t0 };
    }
    default:
      return { error: "unknown command " + msg.cmd };
  }
}

onmessage = async (e) => {
  if (e.data.module) {
    gotModule(e.data.module);
    return;
  }
  await ready;
  let reply;
  try {
    reply = handle(e.data);
  } catch (err) {
    reply = { error: String(err) };
  }
  reply.id = e.data.id;
  reply.done = true;
  postMessage(reply);
};
