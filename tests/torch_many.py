#!/usr/bin/env python3
"""tests/torch_many.py LIST: the PyTorch peer (tools/tfw_torch.py) on many
models in one process, importing torch once (about 2 s a model otherwise).

LIST holds one job a line, three paths separated by TABs:
    WEIGHTS.tfw<TAB>PROMPTS.txt<TAB>OUT
and each job's OUT gets exactly what `tools/tfw_torch.py WEIGHTS --batch
PROMPTS` prints, standard output and standard error together (its lines
as tfrun --batch prints them; a run-time check's failure as an error line),
followed by a last line "exit N" with the status that command would exit with.
"""
import contextlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import tfw_torch  # noqa: E402  (the shim loads tools/python/tfw_torch.py)


def main():
    with open(sys.argv[1]) as f:
        jobs = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    for weights, prompts, out in jobs:
        with open(out, "w") as o, contextlib.redirect_stdout(o), contextlib.redirect_stderr(o):
            sys.argv = ["tfw_torch.py", weights, "--batch", prompts]
            try:
                status = tfw_torch.main()
            except SystemExit as e:  # argparse's errors
                status = e.code
            sys.stdout.flush()
            print("exit %s" % status)
    return 0


if __name__ == "__main__":
    sys.exit(main())
