// playground_driver.js: drives Debian's headless Chromium for tests/playground.sh
// and bench/playground.sh, over the DevTools protocol on a pipe
// (--remote-debugging-pipe: JSON messages separated by NUL on fds 3 and 4),
// so no npm package is needed.
//
//   node tests/playground_driver.js JOBS.json
//
// JOBS.json is a list of {url, upload?, eval, save?, screenshot?, shot?,
// width?, height?, timeout?}: each url is opened in a fresh page; when
// document.body.dataset.state is "done" (web/app.js sets it when the URL's
// work is finished), the file input upload.selector is given the file
// upload.path, the expression `eval` is evaluated in the page (awaited if a
// promise) and, with `save`, its value written to that file as text (and
// not printed); with `screenshot`, a PNG is written there: of the element
// matching the CSS selector `shot`, else of the viewport. Prints one JSON line
// per job: {url, value} or {url, error}. Exit status 0 when every job ran,
// 1 otherwise, 2 when Chromium could not start.
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");

const jobs = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const browser = process.env.CHROMIUM || "chromium";
const profile = fs.mkdtempSync(require("os").tmpdir() + "/tfc-playground-");
const chrome = spawn(browser, ["--headless", "--no-sandbox", "--disable-gpu",
  "--remote-debugging-pipe", "--user-data-dir=" + profile, "--hide-scrollbars",
  "--no-first-run", "about:blank"], { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
chrome.on("error", (e) => {
  console.error(`playground_driver: cannot start ${browser}: ${e.message}`);
  process.exit(2);
});
chrome.stderr.on("data", () => {}); // Chromium's own chatter
const toChrome = chrome.stdio[3], fromChrome = chrome.stdio[4];

let nextId = 1;
const pending = new Map();
const listeners = [];
let buf = Buffer.alloc(0);
fromChrome.on("data", (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  let end;
  while ((end = buf.indexOf(0)) >= 0) {
    const msg = JSON.parse(buf.slice(0, end).toString("utf8"));
    buf = buf.slice(end + 1);
    if (msg.id && pending.has(msg.id)) {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) p.reject(new Error(msg.error.message));
      else p.resolve(msg.result);
    } else if (msg.method) {
      for (const l of listeners.slice()) l(msg);
    }
  }
});

function send(method, params = {}, sessionId) {
  const id = nextId++;
  const msg = { id, method, params };
  if (sessionId) msg.sessionId = sessionId;
  toChrome.write(JSON.stringify(msg) + "\0");
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function evaluate(session, expression) {
  const r = await send("Runtime.evaluate",
    { expression, awaitPromise: true, returnByValue: true }, session);
  if (r.exceptionDetails)
    throw new Error(r.exceptionDetails.exception?.description || r.exceptionDetails.text);
  return r.result.value;
}

async function runJob(job) {
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  try {
    await send("Page.enable", {}, sessionId);
    await send("Runtime.enable", {}, sessionId);
    await send("Emulation.setDeviceMetricsOverride", { width: job.width || 1280,
      height: job.height || 900, deviceScaleFactor: 1, mobile: false }, sessionId);
    await send("Page.navigate", { url: job.url }, sessionId);
    const deadline = Date.now() + (job.timeout || 60) * 1000;
    for (;;) {
      let state = null;
      try {
        state = await evaluate(sessionId, "document.body && document.body.dataset.state");
      } catch (e) { /* the page is still loading */ }
      if (state === "done") break;
      if (Date.now() > deadline) throw new Error("timed out waiting for the page");
      await sleep(50);
    }
    if (job.upload) {
      const { root } = await send("DOM.getDocument", {}, sessionId);
      const { nodeId } = await send("DOM.querySelector",
        { nodeId: root.nodeId, selector: job.upload.selector }, sessionId);
      await send("DOM.setFileInputFiles", { nodeId, files: [job.upload.path] }, sessionId);
    }
    let value = job.eval ? await evaluate(sessionId, job.eval) : null;
    if (job.save) {
      fs.writeFileSync(job.save, String(value));
      value = job.save;
    }
    if (job.screenshot) {
      const params = { format: "png" };
      if (job.shot) {
        const r = await evaluate(sessionId, `(() => { const e = document.querySelector(${
          JSON.stringify(job.shot)}); e.scrollIntoView(); const r = e.getBoundingClientRect();
          return { x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height }; })()`);
        params.clip = Object.assign(r, { scale: 1 });
        params.captureBeyondViewport = true;
      }
      const shot = await send("Page.captureScreenshot", params, sessionId);
      fs.writeFileSync(job.screenshot, Buffer.from(shot.data, "base64"));
    }
    return { url: job.url, value };
  } finally {
    await send("Target.closeTarget", { targetId });
  }
}

(async () => {
  let ok = true;
  for (const job of jobs) {
    try {
      console.log(JSON.stringify(await runJob(job)));
    } catch (e) {
      ok = false;
      console.log(JSON.stringify({ url: job.url, error: e.message }));
    }
  }
  const exited = new Promise((r) => chrome.once("exit", r));
  send("Browser.close").catch(() => {});
  await Promise.race([exited, sleep(5000)]);
  if (chrome.exitCode === null) chrome.kill();
  try {
    fs.rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
  } catch (e) { /* Chromium still writing: leave it to the system */ }
  process.exit(ok ? 0 : 1);
})();
