#!/usr/bin/env python3
"""Cases for bench/engine.sh's two long programs, prompt<TAB>expected, one a line:

    bench/engine_cases.py add_decimal10 N   N random pairs of 10-digit numbers (bench/add_decimal10.tfp)
    bench/engine_cases.py count_long N      N random inputs of 1,024 tokens (bench/count_long.tfp)

The expected outputs are computed here from the tasks' definitions (the sum's 11 digits;
at every position, 1 when that position's token occurs at least 256 times), from a fixed
seed, so every run checks the same cases.
"""
import random
import sys


def add_decimal10(rng):
    a, b = rng.randrange(10 ** 10), rng.randrange(10 ** 10)
    return f"^{a:010d}+{b:010d}=", f"{a + b:011d}"


def count_long(rng):
    # Token frequencies drawn per case, so that counts fall on both sides of 256.
    weights = [rng.random() + 0.2 for _ in "abcd"]
    s = "".join(rng.choices("abcd", weights=weights, k=1024))
    return "^" + s, "".join("1" if s.count(c) >= 256 else "0" for c in s)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("add_decimal10", "count_long"):
        sys.exit(__doc__.strip())
    gen = globals()[sys.argv[1]]
    rng = random.Random(28)
    out = sys.stdout
    for _ in range(int(sys.argv[2])):
        prompt, want = gen(rng)
        out.write(f"{prompt}\t{want}\n")


if __name__ == "__main__":
    main()
