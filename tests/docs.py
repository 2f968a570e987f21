#!/usr/bin/env python3
"""docs.py BUILD_DIR [FILE.md ...]: run the documentation's commands (tests/docs.sh).

Every command block of README.md, docs/*.md and bench/README.md runs, in
order, in a scratch folder per file that holds the source tree's programs/
(a copy), tools/ (links to its files, but a copy of tools/python, which
`pip install tools/python` builds in), tests/, bench/ (links) and build/ (a
link to BUILD_DIR, also first on PATH); the run must leave tools/python in
the source tree as it found it. What a block shows as output is compared with what the
commands print (standard output and standard error together):

  ```sh blocks
    cmd                  a command (continued over lines as the shell does)
    cmd   # -> TEXT      TEXT is a line the command prints
    # TEXT               right after a command (no blank line between):
                         lines the command prints (standard output, then
                         standard error), in that order (other lines may
                         come between them)
    # TEXT               at the start of a block or after a blank line: a
                         remark, not compared
  ``` blocks whose first line starts with "$ " (transcripts)
    $ cmd                a command
    TEXT                 the lines it prints, all of them, in order: its
                         standard output, else its standard output and then
                         its standard error
  In TEXT, "..." stands for any text and a line "..." alone for any number of
  lines; <TAB> is a tab. A transcript's numbers may differ from the doc's in
  their last digits (close(): BLAS kernels sum in their own order); counts
  (integers) may not.

A command that exits non-zero fails unless it shows what it prints (then
that is compared). A block the suite cannot run (a hostfile, srun, apt-get,
a benchmark) is preceded by <!-- docs.sh: skip (reason) -->: it is reported
as skipped, with its reason. Exit 1 when a block fails or none ran.
"""
import difflib
import os
import re
import shutil
import subprocess
import sys
import time
import tempfile

SRC = os.environ.get("TF_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = re.compile(r"<!--\s*docs\.sh:\s*skip\s*\((.*)\)\s*-->")
MARK = "@@docs.sh@@"


def complete(text):
    """Whether text is whole shell commands (no open quote, no trailing \\ or |)."""
    if text.rstrip().endswith(("\\", "|", "&&", "||")):
        return False
    return subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True).returncode == 0


def blocks(path):
    """[(line, kind, skip_reason, body lines)] of a markdown file."""
    out, lines = [], open(path).read().split("\n")
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        if not fence.startswith("```"):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        body = lines[i + 1:j]
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        m = SKIP.search(prev)
        reason = m.group(1) if m else None
        if fence == "```sh":
            out.append((i + 1, "sh", reason, body))
        elif fence == "```" and body and body[0].startswith("$ "):
            out.append((i + 1, "transcript", reason, body))
        i = j + 1
    return out


def parse_sh(body):
    """[(command, [expected line patterns], exact)] of a ```sh block."""
    cmds, i, after_blank = [], 0, True
    while i < len(body):
        line = body[i]
        s = line.strip()
        if not s:
            after_blank = True
            i += 1
            continue
        if s.startswith("#"):
            if cmds and not after_blank:
                cmds[-1][1].append(s[1:].strip())
            i += 1
            continue
        text, i = line, i + 1
        while not complete(text) and i < len(body):
            text += "\n" + body[i]
            i += 1
        want = [m.group(1).strip() for m in re.finditer(r"#\s*->\s*(.*)$", text, re.M)]
        cmds.append((text, want, False))
        after_blank = False
    return cmds


def parse_transcript(body):
    cmds, i = [], 0
    while i < len(body):
        if not body[i].startswith("$ "):
            i += 1
            continue
        text, i = body[i][2:], i + 1
        while not complete(text) and i < len(body):
            text += "\n" + body[i]
            i += 1
        want = []
        while i < len(body) and not body[i].startswith("$ "):
            want.append(body[i])
            i += 1
        while want and not want[-1].strip():
            want.pop()
        cmds.append((text, want, True))
    return cmds


# A number standing alone in a doc's output line (not inside a word).
NUM = r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:e[-+]?\d+)?(?![\w.])"


def line_re(p, nums=None):
    """The regular expression of one shown line. With nums (a list), each
    number in it matches any number, captured, and its shown text is
    appended to nums in order (close(): the values are compared after), and
    a run of spaces any run of spaces (numbers right-aligned in columns)."""
    p = p.replace("<TAB>", "\t").rstrip()
    out = []
    # "..." with the spaces around it: "... held-out" matches "held-out" too.
    for x in re.split(r" ?\.\.\. ?", p):
        if nums is None:
            out.append(re.escape(x))
            continue
        # Columns of numbers are aligned: a run of spaces matches any.
        lit = lambda t: " +".join(re.escape(y) for y in re.split(r" +", t))
        k, rx = 0, ""
        for m in re.finditer(NUM, x):
            rx += lit(x[k:m.start()]) + "([-+]?(?:\\d+\\.?\\d*|\\.\\d+)(?:e[-+]?\\d+)?|nan|-?inf)"
            nums.append(m.group(0))
            k = m.end()
        out.append(rx + lit(x[k:]))
    return ".*?".join(out)


def close(shown, got):
    """A printed float may differ from the doc's in its last bits (the BLAS
    kernels sum in another order: docs/training.md, "What is reproducible
    where"): within 1e-5 of the larger of 1 and its size, and a number shown
    with decimals by one unit in its last; an integer (a count) exactly."""
    try:
        a, b = float(shown), float(got)
    except ValueError:
        return shown == got
    tol = 1e-5 * max(1.0, abs(a), abs(b))
    if "." in shown and "e" not in shown:
        tol += 10.0 ** -len(shown.split(".")[1])
    return abs(a - b) <= tol


def line_ok(w, g):
    """Whether got line g is shown line w: as written, else with its numbers
    compared by value (close())."""
    if re.fullmatch(line_re(w), g) is not None:
        return True
    nums = []
    m = re.fullmatch(line_re(w, nums), g)
    return m is not None and all(close(a, b) for a, b in zip(nums, m.groups()))


def matches(want, got, exact):
    got = [g.rstrip() for g in got]
    if exact:
        # Line by line, a "..." line standing for any number of lines: a
        # table of which suffixes match (a regular expression over the whole
        # text backtracked for hours on a long transcript that did not match).
        n, k = len(want), len(got)
        ok = [[False] * (k + 1) for _ in range(n + 1)]
        ok[n][k] = True
        for i in range(n - 1, -1, -1):
            dots = want[i].strip() == "..."
            for j in range(k, -1, -1):
                if dots:
                    ok[i][j] = ok[i + 1][j] or (j < k and ok[i][j + 1])
                else:
                    ok[i][j] = j < k and ok[i + 1][j + 1] and line_ok(want[i], got[j])
        return ok[0][0]
    k = 0
    for w in want:
        rx = re.compile(line_re(w))
        while k < len(got) and not rx.fullmatch(got[k]):
            k += 1
        if k == len(got):
            return False
        k += 1
    return True


def scratch(build):
    # In the build folder, not /tmp (a machine may clean /tmp under a long run).
    d = os.path.join(os.path.abspath(build), "docs-scratch")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    os.symlink(os.path.abspath(build), os.path.join(d, "build"))
    shutil.copytree(os.path.join(SRC, "programs"), os.path.join(d, "programs"))
    for name in ("tests", "bench"):
        os.symlink(os.path.join(SRC, name), os.path.join(d, name))
    # pip builds a package in its folder (build/, *.egg-info): a copy of it.
    os.makedirs(os.path.join(d, "tools"))
    for name in os.listdir(os.path.join(SRC, "tools")):
        src = os.path.join(SRC, "tools", name)
        if name == "python":
            shutil.copytree(src, os.path.join(d, "tools", name))
        else:
            os.symlink(src, os.path.join(d, "tools", name))
    return d


def run_block(cmds, cwd, env):
    """[(stdout lines, stderr lines)] and {n: exit status} of each command."""
    errs = tempfile.mkdtemp(prefix="docs-stderr.", dir=os.path.dirname(cwd))
    script = []
    for n, (text, _, _) in enumerate(cmds):
        script += ["echo %s%d" % (MARK, n), "{\n%s\n} 2>%s/%d" % (text, errs, n),
                   "echo %s%d status $?" % (MARK, n)]
    try:
        r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=env, text=True,
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=900,
                           errors="replace")
        out = r.stdout
    except OSError as e:
        out = "(docs.sh: could not run the block: %s)\n" % e
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += "\n(docs.sh: the block took over 900 s)\n"
    results, cur, lines, status = [], None, [], {}
    for line in out.split("\n"):
        m = re.fullmatch(re.escape(MARK) + r"(\d+)( status (\d+))?", line)
        if m and m.group(2):
            status[int(m.group(1))] = int(m.group(3))
            results.append(lines)
            cur, lines = None, []
        elif m:
            cur, lines = int(m.group(1)), []
        elif cur is not None:
            lines.append(line)
    if cur is not None:
        results.append(lines)
    for n in range(len(results)):
        try:
            with open(os.path.join(errs, str(n)), errors="replace") as f:
                err = f.read().splitlines()
        except OSError:
            err = []
        results[n] = (results[n], err)
    shutil.rmtree(errs, ignore_errors=True)
    return results, status


def main():
    build = sys.argv[1]
    # The pages in a reader's order: the README, the language, training
    # (inspect.md looks at models it trains), then the rest.
    first = ["docs/language.md", "docs/training.md", "docs/inspect.md"]
    rest = sorted("docs/" + f for f in os.listdir(os.path.join(SRC, "docs")) if f.endswith(".md"))
    files = sys.argv[2:] or (["README.md"] + first + [f for f in rest if f not in first] +
                             ["bench/README.md"])
    env = dict(os.environ)
    env["PATH"] = os.path.abspath(build) + os.pathsep + env.get("PATH", "")
    # mpirun as root (CI containers) and more ranks than cores (docs/cluster.md).
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    ran = failed = skipped = 0
    # One scratch folder, the files in order: a page uses what the README
    # made (adder.tfw, cases.tsv), as a reader who followed it would.
    d = scratch(build)
    package = sorted(os.listdir(os.path.join(SRC, "tools", "python")))
    try:
        for f in files:
            bl = blocks(os.path.join(SRC, f))
            for line, kind, reason, body in bl:
                where = "%s:%d" % (f, line)
                if reason is not None:
                    print("skip %s (%s)" % (where, reason))
                    skipped += 1
                    continue
                cmds = parse_sh(body) if kind == "sh" else parse_transcript(body)
                if not cmds:
                    continue
                t0 = time.monotonic()
                results, status = run_block(cmds, d, env)
                took = time.monotonic() - t0
                ran += 1
                bad = []
                for n, (text, want, exact) in enumerate(cmds):
                    out, err = results[n] if n < len(results) else ([], [])
                    # A transcript shows standard output; "# " lines may
                    # show either stream.
                    got = out if exact and matches(want, out, exact) else out + err
                    st = status.get(n)
                    if st is None:
                        bad.append((text, "did not finish", want, got, out, err))
                    elif want and not matches(want, got, exact):
                        bad.append((text, "printed something else (exit %d)" % st, want, got, out, err))
                    elif not want and st != 0:
                        bad.append((text, "exit %d" % st, want, got, out, err))
                if bad:
                    failed += 1
                    print("FAIL %s (%.1f s)" % (where, took))
                    for text, why, want, got, out, err in bad:
                        print("  $ %s\n  %s" % (text.replace("\n", "\n    "), why))
                        if want and exact:  # a diff: the doc's lines (-) against the output (+)
                            for dl in list(difflib.unified_diff([w.rstrip() for w in want],
                                                                [g.rstrip() for g in got],
                                                                "doc", "output", n=1, lineterm=""))[2:60]:
                                print("    " + dl)
                            continue
                        if want:
                            print("  expected:\n" + "\n".join("    | " + w for w in want))
                        shown = out + ["(stderr) " + e for e in err]
                        print("  got:\n" + "\n".join("    | " + g for g in shown[:40]) +
                              ("\n    | ... (%d lines)" % len(shown) if len(shown) > 40 else ""))
                else:
                    print("ok   %s (%d commands, %.1f s)" % (where, len(cmds), took))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    left = sorted(set(os.listdir(os.path.join(SRC, "tools", "python"))) - set(package))
    if left:
        print("FAIL the commands left %s in %s" % (", ".join(left), os.path.join(SRC, "tools", "python")))
        failed += 1
    print("%d blocks ran, %d failed, %d skipped" % (ran, failed, skipped))
    return 1 if failed or not ran else 0


if __name__ == "__main__":
    sys.exit(main())
