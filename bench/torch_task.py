"""What the per-task reference scripts share (bench/torch_<task>.py).

Each script names a task's options (the same flags for tftrain and for
tools/train_torch.py) and runs the PyTorch side:

    /usr/bin/python3 bench/torch_<task>.py INIT.tfw DATA_DIR [--threads N]
    /usr/bin/python3 bench/torch_<task>.py --options      # what bench/training.sh passes to tftrain
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import train_torch  # noqa: E402


def run(options, torch_only=()):
    argv = sys.argv[1:]
    if argv == ["--options"]:
        print(" ".join(options))
        return 0
    if len(argv) < 2:
        print("usage: %s INIT.tfw DATA_DIR [--threads N]" % sys.argv[0], file=sys.stderr)
        return 2
    init, data = argv[0], argv[1]
    return train_torch.main(["train", init, "--data", os.path.join(data, "train.txt"),
                             "--heldout", os.path.join(data, "heldout.txt")] + list(options) +
                            list(torch_only) + argv[2:])
