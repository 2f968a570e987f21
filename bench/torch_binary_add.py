#!/usr/bin/env python3
"""Seed 000 in PyTorch: binary addition of 8-bit numbers (programs/binary_add.tfp).

The reference for bench/training.sh: the same initial weights (tfc), the same
20,000 training and 1,000 held-out examples (tftrain --write-data), the same
optimizer, schedule, batch size and number of steps as tftrain.
"""
import sys

from torch_task import run

TASK = ["--task", "binary-add:8", "--train-size", "20000", "--heldout-size", "1000"]
OPTIONS = ["--optimizer", "adamw", "--lr", "3e-3", "--warmup", "100", "--cosine",
           "--batch-size", "64", "--steps", "3000"]

if __name__ == "__main__":
    if sys.argv[1:] == ["--task"]:
        print(" ".join(TASK))
        sys.exit(0)
    sys.exit(run(OPTIONS))
