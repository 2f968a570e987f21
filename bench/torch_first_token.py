#!/usr/bin/env python3
"""Seed 004 in PyTorch: first-token recall over 20 tokens of vocabulary 5
(programs/first_token.tfp: one post-norm block, d_model 8, dropout 0.1), Adam at 1e-3,
batch 32 over 1,000 sequences, as in the seed.

The reference for bench/training.sh (same weights, data, optimizer and steps as tftrain).
"""
import sys

from torch_task import run

TASK = ["--task", "first-token:20", "--train-size", "1000", "--heldout-size", "1000"]
OPTIONS = ["--optimizer", "adam", "--lr", "1e-3", "--batch-size", "32", "--steps", "6000"]

if __name__ == "__main__":
    if sys.argv[1:] == ["--task"]:
        print(" ".join(TASK))
        sys.exit(0)
    sys.exit(run(OPTIONS))
