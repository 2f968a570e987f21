#!/usr/bin/env python3
"""Write the adder's test cases, one per line: prompt<TAB>expected completion.

    tools/adder_cases.py [--max N] [--digits D] [--shard R/N] > cases.tsv

Every pair a+b with 0 <= a, b < N (default 1000: the 1,000,000 cases seed 001
checks), written as D-digit numbers (default 4), in order a, then b. The
expected completion is the D digits of a+b least-significant first, as
programs/adder.tfp writes them: 0999+0111= -> 0111 (1110 reversed). Sums with
more than D digits are left out (the adder keeps D digits; the carry out is
lost by design), unless --wrap asks for the sum modulo 10^D.

--shard R/N writes only part R of N (0 <= R < N): the pairs whose index
a * MAX + b is in [R * MAX^2 / N, (R + 1) * MAX^2 / N). The parts, one after
the other, are the whole file, so each rank of an MPI job can make its own
(docs/cluster.md):

    mpirun -n 4 sh -c 'tools/adder_cases.py --shard $OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE |
                       build/tfrun adder.tfw --check - --shard-input'
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max", type=int, default=1000, help="operands run over 0..MAX-1")
    ap.add_argument("--digits", type=int, default=4, help="digits per operand")
    ap.add_argument("--wrap", action="store_true", help="expect the sum modulo 10^digits")
    ap.add_argument("--shard", default="0/1", metavar="R/N", help="write part R of N")
    a = ap.parse_args()
    if a.digits < 1 or a.max < 1 or a.max > 10 ** a.digits:
        ap.error("need 1 <= max <= 10^digits")
    try:
        r, n = (int(v) for v in a.shard.split("/"))
    except ValueError:
        ap.error("--shard wants R/N, two numbers")
    if not 0 <= r < n:
        ap.error("--shard R/N needs 0 <= R < N")
    d, limit = a.digits, 10 ** a.digits
    first, last = r * a.max * a.max // n, (r + 1) * a.max * a.max // n
    out = sys.stdout
    lines = []
    for x in range(first // a.max, (last + a.max - 1) // a.max):
        for y in range(max(0, first - x * a.max), min(a.max, last - x * a.max)):
            s = x + y
            if s >= limit:
                if not a.wrap:
                    continue
                s %= limit
            lines.append(f"{x:0{d}d}+{y:0{d}d}=\t{str(s).zfill(d)[::-1]}\n")
        if len(lines) >= 100000:
            out.write("".join(lines))
            lines.clear()
    out.write("".join(lines))


if __name__ == "__main__":
    main()
