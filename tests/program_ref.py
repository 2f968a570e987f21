#!/usr/bin/env python3
"""Reference implementations of the program library (programs/*.tfp) and their test cases.

    tests/program_ref.py --list                 the programs, one name a line
    tests/program_ref.py --list-tracr           bench/tracr's programs (Tracr's settings)
    tests/program_ref.py NAME [--max N]         NAME's cases: prompt<TAB>expected, one a line
    tests/program_ref.py NAME --describe        what NAME's cases cover
    tests/program_ref.py NAME --examples TFP    the examples in TFP's header, checked here

Each reference below is plain Python written from the task's definition (RASP, Tracr), not
from the .tfp program: it never looks at registers, attention or counts.

Every-position programs read `^` (the BOS, position 0) and up to 16 input tokens; the
expected string has one token per input token (the output at positions 1..n; the BOS
position is not printed). Generating programs (the arithmetic) expect the generated tokens.

Cases: every string up to some length over the program's input alphabet (exhaustive), then
10,000 random inputs from a fixed seed with lengths 1..16 (a sixteenth of them of length 16);
for the bracket languages half of the random inputs are random walks that stay valid for long
stretches (uniform strings fail almost at once). The arithmetic programs are exhaustive where
the domain allows (8-bit binary addition: all 65,536 pairs) and otherwise random plus
structured carry chains. `--max N` keeps N cases spread evenly over the whole list
(the sanitizer build runs few).
"""
import argparse
import itertools
import re
import random
import sys
import zlib
from fractions import Fraction

MAXN = 16  # input tokens after the BOS (maxlen 17)
HEX = "0123456789ABCDEFG"  # counts 0..16 as one token
RANDOM_CASES = 10000


# ---- references ------------------------------------------------------------------------


def reverse(s):
    return s[::-1]


def length(s):
    return HEX[len(s)] * len(s)


def histogram(s):
    return "".join(HEX[s.count(c)] for c in s)


def double_histogram(s):
    # For each position: how many distinct tokens occur exactly as often as this one.
    count = {c: s.count(c) for c in set(s)}
    return "".join(HEX[sum(1 for d in count if count[d] == count[c])] for c in s)


def sort(s):
    return "".join(sorted(s))  # Python's sort is stable; equal tokens are equal anyway


def sort_case(s):
    return "".join(sorted(s, key=str.islower))  # stable: upper case first, each in input order


def sort_freq(s):
    # Tokens by decreasing frequency; equally frequent ones keep their input order.
    count = {c: s.count(c) for c in set(s)}
    order = sorted(range(len(s)), key=lambda i: (-count[s[i]], i))
    return "".join(s[i] for i in order)


def most_freq(s):
    # The distinct tokens by decreasing frequency, ties by first occurrence; '.' pads.
    firsts = []
    for c in s:
        if c not in firsts:
            firsts.append(c)
    ranked = sorted(firsts, key=lambda c: (-s.count(c), s.index(c)))
    return "".join(ranked) + "." * (len(s) - len(ranked))


def frac_prevs(s):
    # Fraction of the tokens so far (this one included) that are 'a', in tenths rounded
    # down, 'T' when all are.
    out = []
    for i in range(1, len(s) + 1):
        a = s[:i].count("a")
        out.append("T" if a == i else str(10 * a // i))
    return "".join(out)


BAL_NEG = "abcdefghijklmnop"  # balance -1..-16


def balance(s):
    # Opening minus closing parentheses so far: 0..16 as HEX, -1..-16 as a..p.
    out, b = [], 0
    for c in s:
        b += 1 if c == "(" else -1 if c == ")" else 0
        out.append(HEX[b] if b >= 0 else BAL_NEG[-b - 1])
    return "".join(out)


def pair_balance(s):
    # Sign of (fraction of '(' so far) - (fraction of ')' so far): -, 0 or +.
    out, b = [], 0
    for c in s:
        b += 1 if c == "(" else -1 if c == ")" else 0
        out.append("-" if b < 0 else "+" if b > 0 else "0")
    return "".join(out)


def dyck_ptf(s, pairs):
    # Per prefix: F once a closer has no matching opener (wrong type or none), T when the
    # prefix is balanced, P when it is a proper prefix of a balanced string.
    opener = {c: o for o, c in pairs}
    stack, failed, out = [], False, []
    for ch in s:
        if not failed:
            if ch in opener:
                if stack and stack[-1] == opener[ch]:
                    stack.pop()
                else:
                    failed = True
            else:
                stack.append(ch)
        out.append("F" if failed else "T" if not stack else "P")
    return "".join(out)


def shuffle_dyck_ptf(s, pairs):
    # Each pair on its own (a shuffle of Dyck-1 languages): F once some pair's closers
    # outnumber its openers, T when every pair is balanced, P otherwise.
    depth = {o: 0 for o, _ in pairs}
    failed, out = False, []
    for ch in s:
        for o, c in pairs:
            depth[o] += (ch == o) - (ch == c)
            if depth[o] < 0:
                failed = True
        out.append("F" if failed else "T" if all(d == 0 for d in depth.values()) else "P")
    return "".join(out)


def pattern(s, pat="abc"):
    return "".join("1" if s[: i + 1].endswith(pat) else "0" for i in range(len(s)))


def count_token(s, tok="a"):
    return HEX[s.count(tok)] * len(s)


def prefix_sum(s):
    out, total = [], 0
    for c in s:
        total += int(c)
        out.append(str(total % 10))
    return "".join(out)


def shift(s, k=2, fill="_"):
    return (fill * k + s)[: len(s)]


def add_digits(a, b, base, n):
    """n-digit a and b (strings, most significant first) -> n+1 digits of the sum."""
    x, y = int(a, base), int(b, base)
    s = x + y
    digits = []
    for _ in range(n + 1):
        digits.append("0123456789"[s % base])
        s //= base
    return "".join(reversed(digits))


def mul_digit(d, a):
    """One digit d times the n-digit a -> the n+1 digits of the product."""
    return str(int(d) * int(a)).zfill(len(a) + 1)


# ---- cases --------------------------------------------------------------------------------


def strings(alphabet, max_len):
    for n in range(0, max_len + 1):
        for t in itertools.product(alphabet, repeat=n):
            yield "".join(t)


def random_strings(rng, alphabet, count=RANDOM_CASES, maxn=MAXN):
    for i in range(count):
        n = 1 + i % maxn  # every length 1..maxn (16) equally often
        yield "".join(rng.choice(alphabet) for _ in range(n))


def bracket_walks(rng, pairs, count, maxn=MAXN):
    """Strings that mostly stay valid: open or close the innermost pair, now and then a
    wrong closer or an unmatched one."""
    for i in range(count):
        n = 1 + i % maxn
        stack, s = [], []
        for _ in range(n):
            r = rng.random()
            if r < 0.02:
                s.append(rng.choice(pairs)[1])  # any closer: often an error
            elif stack and r < 0.5:
                s.append(stack.pop())
            else:
                o, c = rng.choice(pairs)
                stack.append(c)
                s.append(o)
        yield "".join(s)


def seq_cases(ref, alphabet, exhaustive_len, walks=None, maxn=MAXN):
    def gen(rng):
        seen = set()
        for s in strings(alphabet, exhaustive_len):
            seen.add(s)
            yield s
        rand = list(random_strings(rng, alphabet, RANDOM_CASES // 2 if walks else RANDOM_CASES,
                                   maxn))
        if walks:
            rand += list(bracket_walks(rng, walks, RANDOM_CASES - len(rand), maxn))
        for s in rand:
            yield s

    def cases(rng):
        for s in gen(rng):
            yield "^" + s, ref(s)

    how = (f"exhaustive: every string over '{alphabet}' of length 0..{exhaustive_len}; "
           f"random: {RANDOM_CASES} of length 1..{maxn} (each length equally often)"
           + (", half of them near-valid bracket walks" if walks else ""))
    return cases, how, lambda prompt: ref(prompt[1:])


def binary_add_cases(rng):
    n = 8
    for x in range(2 ** n):
        for y in range(2 ** n):
            a, b = format(x, "08b"), format(y, "08b")
            yield f"^{a}+{b}=", add_digits(a, b, 2, n)


def decimal_add_cases(rng, n=8):
    def case(a, b):
        return f"^{a}+{b}=", add_digits(a, b, 10, n)

    # Structured: each column's digit sum is 8, 9 (carry propagates) or 10 (carry
    # generated), every pattern of those, digits random: all carry chains.
    for pat in itertools.product((8, 9, 10), repeat=n):
        a, b = "", ""
        for p in pat:
            x = rng.randint(max(0, p - 9), min(9, p))
            a += str(x)
            b += str(p - x)
        yield case(a, b)
    extremes = ["0" * n, "9" * n, "0" * (n - 1) + "1", "1" + "0" * (n - 1), "5" * n, "4" * n]
    for a in extremes:
        for b in extremes:
            yield case(a, b)
    for _ in range(RANDOM_CASES):
        a = "".join(rng.choice("0123456789") for _ in range(n))
        b = "".join(rng.choice("0123456789") for _ in range(n))
        yield case(a, b)


def decimal_add16_cases(rng, n=16):
    def case(a, b):
        return f"^{a}+{b}=", add_digits(a, b, 10, n)

    def digits_for(sums):
        a, b = "", ""
        for p in sums:
            x = rng.randint(max(0, p - 9), min(9, p))
            a += str(x)
            b += str(p - x)
        return a, b

    # Every single carry chain: columns i..j-1 sum to 9, column j makes (10..18) or
    # stops (0..8) a carry, the others random.
    for i in range(n):
        for j in range(i, n + 1):
            for end in (rng.randint(10, 18), rng.randint(0, 8)):
                sums = [rng.randint(0, 18) for _ in range(n)]
                sums[i:j] = [9] * (j - i)
                if j < n:
                    sums[j] = end
                yield case(*digits_for(sums))
    for _ in range(5000):  # random patterns of column sums 8, 9, 10
        yield case(*digits_for([rng.choice((8, 9, 10)) for _ in range(n)]))
    extremes = ["0" * n, "9" * n, "0" * (n - 1) + "1", "1" + "0" * (n - 1), "5" * n, "4" * n]
    for a in extremes:
        for b in extremes:
            yield case(a, b)
    for _ in range(RANDOM_CASES):
        a = "".join(rng.choice("0123456789") for _ in range(n))
        b = "".join(rng.choice("0123456789") for _ in range(n))
        yield case(a, b)


# AdderBoard's ten edge cases (issue 23): the pairs its verifier tries first.
ADDERBOARD_EDGES = [(0, 0), (0, 1), (9_999_999_999, 0), (9_999_999_999, 1),
                    (9_999_999_999, 9_999_999_999), (5_000_000_000, 5_000_000_000),
                    (1_111_111_111, 8_888_888_889), (1_234_567_890, 9_876_543_210),
                    (9_999_999_999, 9_999_999_999), (1, 9_999_999_999)]


def add10_cases(rng, n=10):
    for a, b in ADDERBOARD_EDGES:
        a, b = f"{a:0{n}d}", f"{b:0{n}d}"
        yield f"^{a}+{b}=", add_digits(a, b, 10, n)
    # Every single carry chain, as add_decimal16's, then random pairs.
    for case in itertools.islice(decimal_add16_cases(rng, n), n * (n + 3)):
        yield case
    for _ in range(RANDOM_CASES):
        a = "".join(rng.choice("0123456789") for _ in range(n))
        b = "".join(rng.choice("0123456789") for _ in range(n))
        yield f"^{a}+{b}=", add_digits(a, b, 10, n)


def mul_digit_cases(rng, n=8):
    def case(d, a):
        return f"^{d}*{a}=", mul_digit(d, a)

    for d in "0123456789":
        for a in ["0" * n, "9" * n, "1" * n, "1" + "0" * (n - 1), ("12345679" * n)[:n]]:
            yield case(d, a)
    # Long carry chains: numbers whose products are near a power of ten, e.g. 7 * 14285714.
    for d in range(1, 10):
        for k in range(1, n + 1):
            for delta in (-2, -1, 0, 1, 2):
                v = (10 ** k) // d + delta
                if 0 <= v < 10 ** n:
                    yield case(str(d), str(v).zfill(n))
    for i in range(RANDOM_CASES):
        d = str(i % 10)
        a = "".join(rng.choice("0123456789") for _ in range(n))
        yield case(d, a)


def words(ws):
    """programs/words.tfp: the words reversed, each "the" as the count of "the" up to it,
    10 and -1 swapped."""
    swap = {"10": "-1", "-1": "10"}
    return [str(ws[:i + 1].count("the")) if ws[i] == "the" else swap.get(ws[i], ws[i])
            for i in reversed(range(len(ws)))]


WORDS = ["the", "cat", "sat", "on", "mat", "10", "-1"] + [str(d) for d in range(9)]


def wordplay(ws):
    """programs/wordplay.tfp: each word in capitals when an earlier word is an anagram of it
    (case aside), else itself when it holds an n, else reversed."""
    key = ["".join(sorted(w.lower())) for w in ws]
    return [w.upper() if key[:i].count(key[i]) else w if "n" in w.lower() else w[::-1]
            for i, w in enumerate(ws)]


WORDPLAY = ["ab", "ba", "abc", "cba", "noon", "AB", "BA", "ABC", "CBA", "NOON"]


def word_cases(ref, vocab, exhaustive_len, maxn):
    """Prompts of words ("^ the cat"), every one up to exhaustive_len words, then random
    ones of 1..maxn words; the expected tokens separated by spaces."""
    def cases(rng):
        for n in range(exhaustive_len + 1):
            for t in itertools.product(vocab, repeat=n):
                yield " ".join(("^",) + t), " ".join(ref(list(t)))
        for i in range(RANDOM_CASES):
            t = [rng.choice(vocab) for _ in range(1 + i % maxn)]
            yield " ".join(["^"] + t), " ".join(ref(t))
    how = (f"exhaustive: every sequence of the {len(vocab)} words of length 0..{exhaustive_len}; "
           f"random: {RANDOM_CASES} of length 1..{maxn}")
    return cases, how, lambda prompt: " ".join(ref(prompt.split()[1:]))


PROGRAMS = {}


def program(name, cases_and_how):
    PROGRAMS[name] = cases_and_how


program("reverse", seq_cases(reverse, "abc", 8))
program("words", word_cases(words, WORDS, 3, 8))
program("wordplay", word_cases(wordplay, WORDPLAY, 3, 8))
program("length", seq_cases(length, "ab", 10))
program("histogram", seq_cases(histogram, "abcd", 6))
program("double_histogram", seq_cases(double_histogram, "abcd", 6))
program("sort", seq_cases(sort, "abcd", 6))
program("sort_freq", seq_cases(sort_freq, "abcd", 6))
program("sort_case", seq_cases(sort_case, "ABCDEFGHIJKLMNOPabcdefghijklmnop", 2, maxn=30))
program("most_freq", seq_cases(most_freq, "abcd", 6))
program("frac_prevs", seq_cases(frac_prevs, "abc", 8))
program("frac_prevs_mean", seq_cases(frac_prevs, "abc", 8))
program("count_token", seq_cases(count_token, "abc", 8))
program("shift", seq_cases(shift, "abc", 8))
program("prefix_sum", seq_cases(prefix_sum, "0123456789", 4))
program("pattern", seq_cases(pattern, "abc", 8))
program("balance", seq_cases(balance, "()", 13, walks=[("(", ")")]))
program("pair_balance", seq_cases(pair_balance, "()", 10, walks=[("(", ")")], maxn=10))
program("dyck1", seq_cases(lambda s: dyck_ptf(s, [("(", ")")]), "()", 13, walks=[("(", ")")]))
program("dyck2", seq_cases(lambda s: dyck_ptf(s, [("(", ")"), ("{", "}")]), "(){}", 6,
                           walks=[("(", ")"), ("{", "}")]))
program("dyck3", seq_cases(lambda s: dyck_ptf(s, [("(", ")"), ("[", "]"), ("{", "}")]),
                           "()[]{}", 5, walks=[("(", ")"), ("[", "]"), ("{", "}")]))
program("shuffle_dyck2", seq_cases(lambda s: shuffle_dyck_ptf(s, [("(", ")"), ("{", "}")]),
                                   "(){}", 6, walks=[("(", ")"), ("{", "}")]))
def solve_add(base, n):
    def solve(prompt):  # ^A+B=
        a, b = prompt[1:-1].split("+")
        assert len(a) == len(b) == n, prompt
        return add_digits(a, b, base, n)
    return solve


def solve_mul(prompt):  # ^d*A=
    d, a = prompt[1:-1].split("*")
    return mul_digit(d, a)


program("add_binary", (binary_add_cases, "exhaustive: all 65,536 pairs of 8-bit numbers",
                       solve_add(2, 8)))
program("add_decimal", (decimal_add_cases,
                        "structured: all 6,561 patterns of column sums 8/9/10 (every carry "
                        "chain), digits random; 36 extreme pairs; random: 10,000 pairs",
                        solve_add(10, 8)))
program("add_decimal16", (decimal_add16_cases,
                          "structured: every carry chain (columns i..j-1 summing to 9, column "
                          "j making or stopping a carry; 304), 5,000 random patterns of column "
                          "sums 8/9/10; 36 extreme pairs; random: 10,000 pairs",
                          solve_add(10, 16)))
program("add10", (add10_cases,
                  "AdderBoard's 10 edge cases; every carry chain (columns i..j-1 summing to 9, "
                  "column j making or stopping a carry; 130); random: 10,000 pairs",
                  solve_add(10, 10)))
program("mul_digit", (mul_digit_cases,
                      "structured: 50 fixed numbers x digit, 353 products near powers of ten "
                      "(long carry chains); random: 10,000 (each digit 1,000 times)",
                      solve_mul))



# ---- bench/tracr: Tracr's programs at Tracr's settings -------------------------------------
# Each of the nine programs of issue 12's table twice (bench/tracr/NAME_lib.tfp, the
# library's program; NAME_plain.tfp, one op per RASP op), checked by tests/programs.sh --tracr.
# Tracr's lengths are short: every input up to max_seq_len is a case where that is at most
# 60,000 strings; pair_balance (10 tokens of 5) is exhaustive to 6, then random inputs and
# bracket walks.
TRACR = {}


def frac_tenths(s, tok):
    # frac_prevs of tok in tenths rounded down, T when every token so far is tok.
    out = []
    for i in range(1, len(s) + 1):
        c = s[:i].count(tok)
        out.append("T" if c == i else str(10 * c // i))
    return "".join(out)


def numbers(values):
    # Numeric outputs as tfrun --check reads them: exact fractions, space-separated.
    return " ".join(str(v) for v in values)


def frac_prevs_number(s, tok="l"):
    return numbers(Fraction(s[:i].count(tok), i) for i in range(1, len(s) + 1))


def pair_balance_number(s):
    # Tracr's make_pair_balance: fraction of '(' so far minus fraction of ')' so far.
    return numbers(Fraction(s[:i].count("(") - s[:i].count(")"), i)
                   for i in range(1, len(s) + 1))


def shuffle_dyck_whole(s, pairs):
    # Tracr's make_shuffle_dyck: at every position, 1 when the whole input is balanced pair
    # by pair with no prefix going below zero, else 0.
    ok = s and shuffle_dyck_ptf(s, pairs)[-1] == "T"
    return ("1" if ok else "0") * len(s)


def domain_cases(ref, alphabet, maxn, exhaustive_len=None, walks=None):
    """Every string up to exhaustive_len (default maxn); when that is short of maxn,
    RANDOM_CASES more of length 1..maxn (half of them bracket walks with `walks`)."""
    exhaustive_len = maxn if exhaustive_len is None else exhaustive_len
    if exhaustive_len >= maxn:
        def cases(rng):
            for s in strings(alphabet, maxn):
                yield "^" + s, ref(s)
        how = f"exhaustive: every string over '{alphabet}' of length 0..{maxn}"
        return cases, how, lambda prompt: ref(prompt[1:])
    return seq_cases(ref, alphabet, exhaustive_len, walks=walks, maxn=maxn)


def unique_cases(ref, alphabet):
    """Every string of distinct tokens (sort_unique: Tracr supports unique keys only)."""
    def cases(rng):
        for n in range(len(alphabet) + 1):
            for t in itertools.permutations(alphabet, n):
                s = "".join(t)
                yield "^" + s, ref(s)
    how = f"exhaustive: every string of distinct tokens of '{alphabet}'"
    return cases, how, lambda prompt: ref(prompt[1:])


def tracr_program(name, cases_and_how):
    TRACR[name + "_lib"] = cases_and_how
    TRACR[name + "_plain"] = cases_and_how


def tracr_pair(name, lib, plain):
    TRACR[name + "_lib"] = lib
    TRACR[name + "_plain"] = plain


DYCK2 = [("(", ")"), ("{", "}")]
DYCK3 = [("(", ")"), ("{", "}"), ("[", "]")]
tracr_program("length", domain_cases(length, "abcd", 5))
tracr_program("hist", domain_cases(histogram, "abcd", 5))
tracr_program("sort", domain_cases(sort, "1234", 5))
tracr_program("sort_unique", unique_cases(sort, "1234"))
tracr_pair("frac_prevs", domain_cases(lambda s: frac_tenths(s, "l"), "helo", 5),
           domain_cases(frac_prevs_number, "helo", 5))
tracr_pair("pair_balance",
           domain_cases(pair_balance, "abc()", 10, exhaustive_len=6, walks=[("(", ")")]),
           domain_cases(pair_balance_number, "abc()", 10, exhaustive_len=6,
                        walks=[("(", ")")]))
tracr_pair("shuffle_dyck2", domain_cases(lambda s: shuffle_dyck_ptf(s, DYCK2), "(){}", 5),
           domain_cases(lambda s: shuffle_dyck_whole(s, DYCK2), "(){}", 5))
tracr_pair("shuffle_dyck3", domain_cases(lambda s: shuffle_dyck_ptf(s, DYCK3), "()[]{}", 6),
           domain_cases(lambda s: shuffle_dyck_whole(s, DYCK3), "()[]{}", 6))
tracr_program("detect_pattern", domain_cases(pattern, "abc", 6))

def header_examples(path):
    """The examples in a program's header comment: "PROMPT" -> "EXPECTED"."""
    out = []
    for line in open(path):
        if not line.startswith("#"):
            break
        out += re.findall(r'"(\^[^"]*)" -> "([^"]*)"', line)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--list", action="store_true", help="print the program names")
    ap.add_argument("--list-tracr", action="store_true",
                    help="print the names of bench/tracr's programs (NAME_lib, NAME_plain)")
    ap.add_argument("--max", type=int, default=0, help="keep at most N cases, evenly spread")
    ap.add_argument("--describe", action="store_true", help="what the cases cover")
    ap.add_argument("--examples", metavar="TFP",
                    help="print the examples of TFP's header comment as cases; exit 1 if the "
                    "reference disagrees with one")
    a = ap.parse_args()
    if a.list:
        print("\n".join(PROGRAMS))
        return 0
    if a.list_tracr:
        print("\n".join(TRACR))
        return 0
    if a.name not in PROGRAMS and a.name not in TRACR:
        ap.error(f"unknown program {a.name!r}; --list and --list-tracr show them")
    cases_fn, how, solve = PROGRAMS[a.name] if a.name in PROGRAMS else TRACR[a.name]
    if a.describe:
        print(how)
        return 0
    if a.examples:
        examples = header_examples(a.examples)
        bad = [(p, e, solve(p)) for p, e in examples if solve(p) != e]
        for p, e, want in bad:
            print(f"{a.examples}: header example {p} -> {e}, but the reference gives {want}",
                  file=sys.stderr)
        if not examples:
            print(f"{a.examples}: no header example \"^...\" -> \"...\"", file=sys.stderr)
        sys.stdout.write("".join(f"{p}\t{e}\n" for p, e in examples))
        return 1 if bad or not examples else 0
    rng = random.Random(zlib.crc32(a.name.encode()))
    lines = [f"{p}\t{e}\n" for p, e in cases_fn(rng)]
    if a.max and len(lines) > a.max:
        step = len(lines) / a.max
        lines = [lines[int(i * step)] for i in range(a.max)]
    sys.stdout.write("".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
