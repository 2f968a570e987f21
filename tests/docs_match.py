#!/usr/bin/env python3
"""tests/docs_match.py: tests/docs.py's comparison of a doc's transcript with
what its commands print. The text alike matches; a float that differs in its
last digits (another BLAS kernel's sum order) matches by value, a count
(an integer) does not; right-aligned columns may move."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docs  # noqa: E402

CASES = [  # (shown, printed, exact, should match)
    (["adder.tfw: proven"], ["adder.tfw: proven"], True, True),
    (["a ... c"], ["a b c"], True, True),
    (["    distance                   0        3.141968   1.1368684e-13"],
     ["    distance                   0       3.1419678               0"], True, True),
    (["x", "...", "p 0.57 done"], ["x", "y", "p 0.56 done"], True, True),
    (["p 14.249367"], ["p 14.249362"], True, True),
    (["p 0.57"], ["p 0.55"], True, False),        # two units of the last decimal
    (["35536 passed, 0 failed"], ["35535 passed, 1 failed"], True, False),  # counts exactly
    (["layer 9 is_zero"], ["layer 10 is_zero"], True, False),
    (["margin 0.691"], ["margin 0.717"], True, False),
    (["adder.tfw: proven"], ["adder.tfw: NOT PROVEN"], True, False),
    (["held-out 100.00%"], ["loss 1", "held-out 100.00%"], False, True),
]


def main():
    failed = 0
    for shown, printed, exact, want in CASES:
        got = docs.matches(shown, printed, exact)
        if got != want:
            print("FAIL: %r against %r: %s, want %s" % (shown, printed, got, want))
            failed += 1
    print("%d of %d comparisons as expected" % (len(CASES) - failed, len(CASES)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
