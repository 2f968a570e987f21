#!/usr/bin/env python3
"""Seed 002 in PyTorch: the xor of the first and last token, 4 noise tokens between
(programs/xor.tfp), SGD with momentum as in the seed.

The reference for bench/training.sh (same weights, data, optimizer and steps as tftrain).
"""
import sys

from torch_task import run

TASK = ["--task", "xor:4", "--train-size", "4000", "--heldout-size", "1000"]
OPTIONS = ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--batch-size", "32",
           "--steps", "3000"]

if __name__ == "__main__":
    if sys.argv[1:] == ["--task"]:
        print(" ".join(TASK))
        sys.exit(0)
    sys.exit(run(OPTIONS))
