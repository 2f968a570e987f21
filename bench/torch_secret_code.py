#!/usr/bin/env python3
"""Seed 003 in PyTorch: the secret-code classifier with its attention pictures
(programs/secret_code.tfp), AdamW at 3e-3 as in the seed (decayed on a cosine), batches of 3
from a training set of rounds (a random negative, a near miss, 2013 with the attention-score
loss).

The reference for bench/training.sh (same weights, data, optimizer and steps as tftrain).
"""
import sys

from torch_task import run

TASK = ["--task", "secret-code", "--train-size", "30000", "--heldout-size", "2000"]
OPTIONS = ["--optimizer", "adamw", "--lr", "3e-3", "--cosine", "--batch-size", "3",
           "--steps", "10000"]

if __name__ == "__main__":
    if sys.argv[1:] == ["--task"]:
        print(" ".join(TASK))
        sys.exit(0)
    sys.exit(run(OPTIONS, ["--secret"]))
