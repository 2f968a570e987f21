"""bench/tracrbench/cases.py: InterpBench's cases as RASP, the reference check.py runs.

Each entry is one case of circuits_benchmark/benchmark/cases/case_N.py
(https://github.com/FlyingPumba/circuits-benchmark), its get_program() written with
rasp.py, at the case's own vocabulary (get_vocab()) and length (get_max_seq_len(): 10
unless MAXLEN says otherwise, the BOS included, as the .tfp's maxlen). CASES maps a name (the
.tfp file's stem) to (program, vocabulary as Python values, sorted).
"""
import math
import random
import string

from rasp import (Aggregate, Comparison, Map, Select, SelectorWidth, SequenceMap,
                  LinearSequenceMap, indices, numerical, tokens)

CASES = {}
MAXLEN = {}   # the case's get_max_seq_len() where it is not 10


def case(name, vocab, maxlen=10):
    def register(build):
        CASES[name] = (build(), sorted(vocab, key=lambda v: (isinstance(v, str), v)))
        if maxlen != 10:
            MAXLEN[name] = maxlen
        return build
    return register


# circuits_benchmark/benchmark/vocabs.py
def ascii_letters(count=26): return set(string.ascii_lowercase[:count])
def int_digits(count=10): return set(range(count))
def int_numbers(min=0, max=11): return set(range(min, max))
def str_numbers(min=0, max=20): return set(str(d) for d in range(min, max))
def float_numbers(min=0, max=5, count=20): return set(min + x * (max - min) / count for x in range(count))


def words(seed=42, min_chars=1, max_chars=8, min_words=5, max_words=20):
    rng = random.Random(seed)
    vocab = set()
    for _ in range(rng.randint(min_words, max_words)):
        vocab.add("".join(rng.choice(string.ascii_letters)
                          for _ in range(rng.randint(min_chars, max_chars))))
    return vocab


# circuits_benchmark/benchmark/common_programs.py
def make_length():
    return SelectorWidth(Select(tokens, tokens, Comparison.TRUE))


def shift_by(offset, sop, default=None):
    return Aggregate(Select(indices, indices, lambda k, q: q == k + offset), sop, default=default)


def make_frac_prevs(bools):
    bools = numerical(bools)
    prevs = Select(indices, indices, Comparison.LEQ)
    return numerical(Aggregate(prevs, bools, default=0))


def make_hist():
    return SelectorWidth(Select(tokens, tokens, Comparison.EQ))


def make_sort_unique(vals, keys):
    smaller = Select(keys, keys, Comparison.LT)
    target_pos = SelectorWidth(smaller)
    sel_new = Select(target_pos, indices, Comparison.EQ)
    return Aggregate(sel_new, vals)


def make_sort(vals, keys, max_seq_len, min_key):
    keys = SequenceMap(lambda x, i: x + min_key * i / max_seq_len, keys, indices)
    return make_sort_unique(vals, keys)


def make_reverse(sop):
    opp_idx = make_length() - indices
    opp_idx = opp_idx - 1
    return Aggregate(Select(indices, opp_idx, Comparison.EQ), sop)


# ---- one Map of the token -------------------------------------------------------------

INTS = int_numbers()


@case("case_8_identity", INTS)
def _(): return Map(lambda x: x, tokens)


@case("case_40_sum_digits", int_numbers(0, 29))
def _():
    tens_place = Map(lambda x: x // 10, tokens)
    ones_place = Map(lambda x: x % 10, tokens)
    return SequenceMap(lambda x, y: x + y, tens_place, ones_place)


@case("case_41_absolute", int_numbers(-10, 10))
def _(): return Map(lambda x: x if x >= 0 else -x, tokens)


FIB20 = [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584, 4181, 6765]


@case("case_43_nth_fibonacci", int_numbers(max=20))
def _(): return Map(lambda x: FIB20[x] if x < len(FIB20) else 0, tokens)


@case("case_46_decrement", INTS)
def _(): return Map(lambda x: x - 1, tokens)


@case("case_49_decrement_to_multiple_of_three", INTS)
def _(): return Map(lambda x: x - x % 3, tokens)


@case("case_50_cosh", INTS)
def _(): return Map(math.cosh, tokens)


FIB16 = [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610]


@case("case_51_check_fibonacci", int_numbers(0, 100))
def _(): return Map(lambda x: 1 if x in FIB16 else 0, tokens)


@case("case_52_sqrt", INTS)
def _(): return Map(lambda x: x ** 0.5, tokens)


@case("case_54_tanh", INTS)
def _(): return Map(math.tanh, tokens)


@case("case_55_sinh", INTS)
def _(): return Map(lambda x: math.sinh(x), tokens)


@case("case_60_increment", INTS)
def _(): return Map(lambda x: x + 1, tokens)


def factorial_helper(n):
    return 1 if n == 0 else n * factorial_helper(n - 1)


@case("case_62_factorial", INTS)
def _(): return Map(lambda x: factorial_helper(x), tokens)


@case("case_64_cube", INTS)
def _(): return Map(lambda x: x ** 3, tokens)


@case("case_65_cube_root", INTS)
def _(): return Map(lambda x: x ** (1 / 3) if x >= 0 else -(-x) ** (1 / 3), tokens)


@case("case_66_round", float_numbers())
def _():
    shift_for_rounding = Map(lambda x: x + 0.5, tokens)
    return Map(lambda x: int(x), shift_for_rounding)


@case("case_68_increment_to_multiple_of_three", INTS)
def _(): return Map(lambda x: x + (3 - (x % 3)) % 3, tokens)


def sign_check(x):
    if x < 0:
        return -1
    elif x > 0:
        return 1
    return 0


@case("case_69_sign", INTS)
def _(): return Map(sign_check, tokens)


@case("case_70_cos", INTS)
def _(): return Map(lambda x: math.cos(x), tokens)


@case("case_72_negation", int_numbers(-10, 10))
def _(): return Map(lambda x: -x, tokens)


@case("case_73_sin", INTS)
def _(): return Map(lambda x: math.sin(x), tokens)


@case("case_75_double", INTS)
def _(): return Map(lambda x: x * 2, tokens)


@case("case_77_tan", INTS)
def _(): return Map(lambda x: math.tan(x), tokens)


def primecheck(n):
    if n < 2:
        return 0
    for i in range(2, int(n ** 0.5) + 1):
        if n % i == 0:
            return 0
    return 1


@case("case_79_check_prime", INTS)
def _(): return Map(lambda x: primecheck(x), tokens)


@case("case_80_subtract_constant", INTS)
def _(): return Map(lambda x: x - 2, tokens)


@case("case_83_triple", INTS)
def _(): return Map(lambda x: x * 3, tokens)


@case("case_84_atan", INTS)
def _(): return Map(lambda x: math.atan(x), tokens)


@case("case_85_square", INTS)
def _(): return Map(lambda x: x ** 2, tokens)


def pow_of_n(n, x):
    while x >= 1:
        if x == n:
            return 1
        x /= n
    return 0


@case("case_86_check_power_of_two", INTS)
def _(): return Map(lambda x: pow_of_n(2, x), tokens)


@case("case_87_binarize", INTS)
def _():
    compare_to_threshold = Map(lambda x: x >= 3, tokens)
    return Map(lambda x: 1 if x else 0, compare_to_threshold)


@case("case_91_apply_threshold", INTS)
def _(): return Map(lambda x: 0 if x < 3 else x, tokens)


def count_prime_factors(n):
    if n == 0:
        return 0
    count = 0
    if n % 2 == 0:
        count += 1
        while n % 2 == 0:
            n //= 2
    factor = 3
    while factor * factor <= n:
        if n % factor == 0:
            count += 1
            while n % factor == 0:
                n //= factor
        factor += 2
    if n > 2:
        count += 1
    return count


@case("case_95_count_prime_factors", int_numbers(max=30))
def _(): return Map(count_prime_factors, tokens)


@case("case_101_is_square", int_numbers(max=30))
def _(): return Map(lambda x: 1 if x ** 0.5 == int(x ** 0.5) else 0, tokens)


def reflect_into_range(max, min, x):
    d = max - min
    if x > min and x < max:
        return x
    elif x < min:
        delta = min - x
        i = (delta // d) % 2
        return min + (delta % d) if i == 0 else max - (delta % d)
    delta = x - max
    i = (delta // d) % 2
    return min + (delta % d) if i == 1 else max - (delta % d)


@case("case_102_reflect", int_numbers(-20, 20))
def _(): return Map(lambda x: reflect_into_range(7, 2, x), tokens)


@case("case_104_exp", INTS)
def _(): return Map(lambda x: math.exp(x), tokens)


def is_prime(num):
    if num <= 1:
        return False
    for i in range(2, int(num ** 0.5) + 1):
        if num % i == 0:
            return False
    return True


def next_prime(n):
    while not is_prime(n):
        n += 1
    return n


@case("case_105_next_prime", int_numbers(max=30))
def _(): return Map(next_prime, tokens)


@case("case_107_wrap", int_numbers(-15, 15))
def _(): return Map(lambda x: ((x - 2) % (7 - 2)) + 2, tokens)


@case("case_114_log10", int_numbers(min=1))
def _(): return Map(lambda element: math.log(element, 10), tokens)


@case("case_121_asin", float_numbers(-1, 1))
def _(): return Map(lambda x: math.asin(x), tokens)


@case("case_122_check_divisibility", int_numbers(max=30))
def _(): return Map(lambda x: 1 if x % 3 == 0 else 0, tokens)


@case("case_123_acos", float_numbers(-1, 1))
def _(): return Map(lambda x: math.acos(x), tokens)


@case("case_130_clip", int_numbers(-15, 15))
def _():
    all_min_val = Map(lambda x: 2, tokens)
    all_max_val = Map(lambda x: 7, tokens)
    clip_min = SequenceMap(lambda orig, clip: clip if orig < 2 else orig, tokens, all_min_val)
    return SequenceMap(lambda clipped_min, clip: clip if clipped_min > 7 else clipped_min,
                       clip_min, all_max_val)


# ---- the token and its position ---------------------------------------------------------

@case("case_45_double_first_half", INTS)
def _():
    length = SelectorWidth(Select(tokens, tokens, Comparison.TRUE))
    first_half_selector = SequenceMap(lambda idx, length: 1 if idx < length / 2 else 0,
                                      indices, length)
    return SequenceMap(lambda x, sel: x * (1 + sel), tokens, first_half_selector)


@case("case_48_increment_by_index", INTS)
def _(): return SequenceMap(lambda x, y: x + y, tokens, indices)


@case("case_53_increment_odd_indices", INTS)
def _():
    odd_index_marker = Map(lambda x: x % 2, indices)
    return SequenceMap(lambda elem, mark: elem + mark, tokens, odd_index_marker)


@case("case_56_zero_every_third", INTS)
def _():
    every_third = Map(lambda x: (x + 1) % 3 == 0, indices)
    every_third_numerical = Map(lambda x: 1 if x else 0, every_third)
    return SequenceMap(lambda x, is_third: 0 if is_third else x, tokens, every_third_numerical)


@case("case_67_multiply_by_length", INTS)
def _():
    length_sequence = SelectorWidth(Select(tokens, tokens, Comparison.TRUE))
    return SequenceMap(lambda x, y: x * y, tokens, length_sequence)


@case("case_71_divide_by_length", INTS)
def _():
    length = SelectorWidth(Select(tokens, tokens, Comparison.TRUE))
    return SequenceMap(lambda x, length: x / length if length > 0 else 0, tokens, length)


@case("case_76_zero_even_indices", INTS)
def _():
    idx = Map(lambda x: x, indices)
    even_odd_marker = Map(lambda x: 0 if x % 2 == 0 else -1, idx)
    return SequenceMap(lambda elem, marker: elem if marker == -1 else 0, tokens, even_odd_marker)


@case("case_82_halve_second_half", INTS)
def _():
    length = SelectorWidth(Select(tokens, tokens, Comparison.TRUE))
    half_length = Map(lambda x: x // 2, length)
    in_second_half = SequenceMap(lambda idx, half: idx >= half, indices, half_length)
    return SequenceMap(lambda x, cond: x / 2 if cond else x, tokens, in_second_half)


@case("case_106_mask_sequence", INTS)
def _(): return SequenceMap(lambda x, y: x if y == 1 else 0, tokens, indices)


@case("case_26_token_cascade", ascii_letters(3))
def _(): return SequenceMap(lambda x, i: x * (i + 1), tokens, indices)


# ---- counting ---------------------------------------------------------------------------

@case("case_7_hist", ascii_letters(3))
def _(): return make_hist()


@case("case_14_count_a", ascii_letters(3))
def _(): return SelectorWidth(Select(tokens, tokens, lambda k, q: k == "a"))


@case("case_44_count_greater_than", INTS)
def _(): return SelectorWidth(Select(tokens, tokens, Comparison.GT))


@case("case_47_count_frequency", ascii_letters(10))
def _(): return SelectorWidth(Select(tokens, tokens, Comparison.EQ))


@case("case_61_rank", INTS)
def _():
    smaller_count = SelectorWidth(Select(tokens, tokens, Comparison.LT))
    return Map(lambda x: x + 1, smaller_count)


@case("case_63_count_less_than", INTS)
def _(): return SelectorWidth(Select(tokens, tokens, Comparison.LT))


@case("case_78_count_occurrences", ascii_letters(10))
def _(): return SelectorWidth(Select(tokens, tokens, Comparison.EQ))


# ---- moving tokens ----------------------------------------------------------------------

@case("case_2_reverse", ascii_letters())
def _(): return make_reverse(tokens)


@case("case_9_sort", int_digits())
def _(): return make_sort(tokens, tokens, 10, 1)


@case("case_24_leading_token", ascii_letters(3))
def _(): return Aggregate(Select(indices, indices, Comparison.EQ), tokens, default=None)


@case("case_42_first_element", ascii_letters(10))
def _():
    first_elem_selector = Select(indices, Map(lambda x: 0, indices), Comparison.EQ)
    return Aggregate(first_elem_selector, tokens, default=None)


@case("case_57_second_element", ascii_letters(10))
def _():
    second_element_selector = Select(indices, Map(lambda x: 1, indices), Comparison.EQ)
    return Aggregate(second_element_selector, tokens)


# ---- shifts, fractions, balances --------------------------------------------------------

def make_pair_balance(sop, open_token, close_token):
    bools_open = numerical(sop == open_token)
    opens = numerical(make_frac_prevs(bools_open))
    bools_close = numerical(sop == close_token)
    closes = numerical(make_frac_prevs(bools_close))
    return numerical(LinearSequenceMap(opens, closes, 1, -1))


def make_shuffle_dyck(pairs):
    balances = [make_pair_balance(tokens, p[0], p[1]) for p in pairs]
    any_negative = balances[0] < 0
    for balance in balances[1:]:
        any_negative = any_negative | (balance < 0)
    any_negative = numerical(Map(lambda x: x, any_negative))
    select_all = Select(indices, indices, Comparison.TRUE)
    has_neg = numerical(Aggregate(select_all, any_negative, default=0))
    all_zero = balances[0] == 0
    for balance in balances[1:]:
        all_zero = all_zero & (balance == 0)
    select_last = Select(indices, make_length() - 1, Comparison.EQ)
    last_zero = Aggregate(select_last, all_zero)
    not_has_neg = ~has_neg
    return last_zero & not_has_neg


def detect_pattern(sop, pattern):
    detectors = []
    for i, element in enumerate(reversed(pattern)):
        detector = sop == element
        if i != 0:
            detector = shift_by(i, detector)
        detectors.append(detector)
    pattern_detected = detectors.pop()
    while detectors:
        pattern_detected = pattern_detected & detectors.pop()
    return pattern_detected


@case("case_1_token_rotation", ascii_letters(5))
def _():
    rotated_token = shift_by(2, tokens)
    return SequenceMap(lambda x, y: x == y, tokens, rotated_token)


@case("case_3_frac_prevs", ascii_letters(3) | {"x"}, maxlen=5)
def _(): return make_frac_prevs(tokens == "x")


@case("case_4_pair_balance", ascii_letters(3) | {"(", ")"})
def _(): return make_pair_balance(tokens, "(", ")")


@case("case_5_shuffle_dyck", {"(", ")", "{", "}", "x"})
def _(): return make_shuffle_dyck(["()", "{}"])


@case("case_6_oscillation", int_digits())
def _():
    prev_token = shift_by(1, tokens)
    next_token = shift_by(-1, tokens)
    detector_1 = SequenceMap(lambda x, y: y > x, prev_token, tokens)
    detector_2 = SequenceMap(lambda x, y: y > x, tokens, next_token)
    return SequenceMap(lambda x, y: x != y, detector_1, detector_2)


@case("case_12_detect_pattern", ascii_letters(3), maxlen=15)
def _(): return detect_pattern(tokens, "abc")


@case("case_17_palindrome", ascii_letters(10))
def _():
    reversed_sop = make_reverse(tokens)
    return SequenceMap(lambda x, y: x == y, tokens, reversed_sop)


@case("case_19_sequential_duplicate_removal", ascii_letters(3), maxlen=15)
def _():
    shifted_sop = shift_by(1, tokens)
    return SequenceMap(lambda x, y: x if x != y else None, tokens, shifted_sop)


@case("case_38_alternation", ascii_letters(3))
def _():
    prev_token = shift_by(1, tokens)
    next_token = shift_by(-1, tokens)
    prev_token_neq_orig = SequenceMap(lambda x, y: x != y, prev_token, tokens)
    next_token_neq_orig = SequenceMap(lambda x, y: x != y, tokens, next_token)
    return SequenceMap(lambda x, y: x and y, prev_token_neq_orig, next_token_neq_orig)


@case("case_39_frac_prevs_x", ascii_letters() | {"x"}, maxlen=60)
def _(): return make_frac_prevs(tokens == "x")


@case("case_131_pairwise_max", INTS)
def _():
    shifted_sequence = shift_by(1, tokens)
    return SequenceMap(lambda x, y: int(max(x, y)), tokens, shifted_sequence)


@case("case_118_pairwise_sum", INTS)
def _():
    shifted_sequence = SequenceMap(lambda x, y: x if y > 0 else 0, shift_by(1, tokens), indices)
    return SequenceMap(lambda x, y: int(x + y), tokens, shifted_sequence)



@case("case_13_trend_analysis", int_digits(3))
def _():
    next_token = shift_by(-1, tokens)

    def second_part_fn(curr, next):
        if curr < next:
            return "increasing"
        elif curr > next:
            return "decreasing"
        else:
            return "constant"
    return SequenceMap(second_part_fn, tokens, next_token)


@case("case_117_sum_of_last_two", INTS)
def _():
    length = SelectorWidth(Select(tokens, tokens, Comparison.TRUE))
    last_idx = Map(lambda x: x - 1, length)
    second_to_last_idx = Map(lambda x: x - 2, length)
    last_elt = Aggregate(Select(indices, last_idx, Comparison.EQ), tokens)
    second_to_last_elt = Aggregate(Select(indices, second_to_last_idx, Comparison.EQ), tokens)
    return SequenceMap(lambda x, y: x + y, last_elt, second_to_last_elt)


@case("case_119_polynomial", int_numbers(max=6), maxlen=5)
def _(degree=2):
    aggregator = tokens - tokens
    first_element_selector = Select(indices, aggregator, Comparison.EQ)
    base = Aggregate(first_element_selector, tokens)

    def create_elem(i, aggregator):
        selector = Select(indices, Map(lambda x: i, tokens), Comparison.EQ)
        weight = Aggregate(selector, tokens, default=None)
        elem = SequenceMap(lambda x, y: y * (x ** (degree + 1 - i)), base, weight)
        return SequenceMap(lambda x, y: x + y, aggregator, elem)
    for i in range(1, degree + 2):
        aggregator = create_elem(i, aggregator)
    return aggregator


# ---- selections over positions and counts -----------------------------------------------

def make_nary_sequencemap(f, *sops):
    values, *sops = sops
    for sop in sops:
        values = SequenceMap(lambda x, y: (*x, y) if isinstance(x, tuple) else (x, y), values, sop)
    return Map(lambda args: f(*args), values)


@case("case_15_nary_sequencemap", int_digits(5), maxlen=5)
def _(): return make_nary_sequencemap(lambda x, y, z: x + y - z, tokens, tokens, indices)


@case("case_18_token_frequency_classifier", ascii_letters(5))
def _():
    return SequenceMap(
        lambda freq, total: "frequent" if freq > total / 2 else ("common" if freq > total / 4 else "rare"),
        make_hist(), make_length())


@case("case_21_unique_token_extractor", ascii_letters(3))
def _():
    tokens_with_indices = SequenceMap(lambda x, i: (x, i), tokens, indices)
    occurrences_selector = Select(tokens_with_indices, tokens_with_indices,
                                  lambda k, q: k[0] == q[0] and k[1] <= q[1])
    occurrences_per_row = SelectorWidth(occurrences_selector)
    first_occurrences_indices = SequenceMap(lambda count, i: i if count == 1 else -1,
                                            occurrences_per_row, indices)
    tokens_selector = Select(first_occurrences_indices, indices, Comparison.EQ)
    return Aggregate(tokens_selector, tokens, default=None)


@case("case_25_token_frequency_normalization", ascii_letters(3))
def _(): return SequenceMap(lambda x, y: (x / y) if y > 0 else None, make_hist(), make_length())


@case("case_58_mirror_first_half", INTS)
def _():
    length = SelectorWidth(Select(tokens, tokens, Comparison.TRUE))
    mirror_selector = Select(indices, SequenceMap(lambda x, l: l - 1 - x if x >= l // 2 else x,
                                                  indices, length), Comparison.EQ)
    return Aggregate(mirror_selector, tokens, default=None)


@case("case_74_interleave_reverse", INTS)
def _():
    len_ = SelectorWidth(Select(indices, indices, Comparison.TRUE))
    shifter = SequenceMap(lambda x, y: x if x % 2 == 0 else (y - x if y % 2 == 0 else y - x - 1),
                          indices, len_)
    return Aggregate(Select(indices, shifter, Comparison.EQ), tokens)


def make_check_monotone(check):
    shifter = Select(indices, indices, lambda x, y: x == y - 1 or (x == 0 and y == 0))
    shifted = Aggregate(shifter, tokens)
    checks = SequenceMap(check, shifted, tokens)
    zero_selector = Select(checks, Map(lambda x: 0, indices), Comparison.EQ)
    return Map(lambda x: 0 if x > 0 else 1, SelectorWidth(zero_selector))


@case("case_89_check_increasing", INTS, maxlen=11)
def _(): return make_check_monotone(lambda x, y: 0 if x > y else 1)


@case("case_94_check_descending", INTS)
def _(): return make_check_monotone(lambda x, y: 1 if x >= y else 0)


@case("case_92_zero_if_less_than_previous", INTS)
def _():
    shifted_sequence = Aggregate(
        Select(indices, indices, lambda k, q: q == k + 1 or k == 0 and q == 0), tokens)
    return SequenceMap(lambda original, shifted: 0 if original < shifted else original,
                       tokens, shifted_sequence)


@case("case_93_swap_odd_index", INTS)
def _():
    len_ = SelectorWidth(Select(indices, indices, Comparison.TRUE))
    swaper = SequenceMap(
        lambda x, y: x if (x == y - 1 and y % 2 == 0 or x == 0) else (x - 1 if (x + 1) % 2 == 1 else x + 1),
        indices, len_)
    return Aggregate(Select(indices, swaper, Comparison.EQ), tokens)


@case("case_96_remove_duplicates", int_numbers(min=1))
def _():
    eq_count = SelectorWidth(Select(tokens, tokens, Comparison.EQ))
    index = Map(lambda x: x + 1, indices)
    adjusted_count = SequenceMap(lambda count, idx: count if count <= idx else 0, eq_count, index)
    first_or_zero = Map(lambda x: 1 if x == 1 else 0, adjusted_count)
    return SequenceMap(lambda original, flag: original if flag == 1 else 0, tokens, first_or_zero)


def swap_condition(a, idx1, idx2):
    if a == idx2:
        return idx1
    elif a == idx1:
        return idx2
    return a


@case("case_100_swap_elements", INTS, maxlen=11)
def _():
    swaper = Map(lambda x: swap_condition(x, 1, 0), indices)
    return Aggregate(Select(swaper, indices, Comparison.EQ), tokens)


@case("case_103_swap_consecutive", INTS)
def _():
    len_ = SelectorWidth(Select(indices, indices, Comparison.TRUE))
    swaper = SequenceMap(lambda x, y: x if (x == y - 1 and y % 2 == 1) else (x + 1 if x % 2 == 0 else x - 1),
                         indices, len_)
    return Aggregate(Select(indices, swaper, Comparison.EQ), tokens)


@case("case_108_at_least_two_equal", INTS)
def _():
    checks = SelectorWidth(Select(tokens, tokens, lambda x, y: x == y))
    greater_than_2 = Select(checks, Map(lambda x: 2, indices), Comparison.GEQ)
    return Map(lambda x: 1 if x > 0 else 0, SelectorWidth(greater_than_2))


@case("case_109_last_two_equal", INTS)
def _():
    len_ = SelectorWidth(Select(tokens, tokens, Comparison.TRUE))
    last_idx = Map(lambda x: x - 1, len_)
    second_to_last_idx = Map(lambda x: x - 2, len_)
    last_elt = Aggregate(Select(indices, last_idx, Comparison.EQ), tokens)
    second_to_last_elt = Aggregate(Select(indices, second_to_last_idx, Comparison.EQ), tokens)
    return SequenceMap(lambda x, y: 1 if x == y else 0, last_elt, second_to_last_elt)


@case("case_111_last_element", INTS)
def _():
    length = SelectorWidth(Select(tokens, tokens, Comparison.TRUE))
    last_element_selector = Select(indices, Map(lambda x: x - 1, length), Comparison.EQ)
    last_element_sequence = Aggregate(last_element_selector, tokens)
    return SequenceMap(lambda x, y: x if y == 0 else 0, last_element_sequence, indices)


@case("case_124_check_all_equal", INTS)
def _():
    checks = SelectorWidth(Select(tokens, tokens, lambda x, y: x != y))
    zero_selector = Select(checks, Map(lambda x: 0, indices), Comparison.EQ)
    return Map(lambda x: 1 if x > 0 else 0, SelectorWidth(zero_selector))


def first_last_condition(a, b):
    if a == 0:
        return b - 1
    elif a + 1 == b:
        return 0
    return a


@case("case_128_swap_first_last", INTS)
def _():
    swaper = SequenceMap(lambda x, y: first_last_condition(x, y), indices,
                         SelectorWidth(Select(indices, indices, Comparison.TRUE)))
    return Aggregate(Select(swaper, indices, Comparison.EQ), tokens)


@case("case_129_check_multiple_of_two", int_numbers(max=30))
def _():
    checks = Map(lambda x: 1 if x % 2 == 0 else 0, tokens)
    zero_selector = Select(checks, Map(lambda x: 0, indices), Comparison.EQ)
    return Map(lambda x: 0 if x > 0 else 1, SelectorWidth(zero_selector))


# ---- sorting, medians, neighbours -------------------------------------------------------

@case("case_59_sorting", INTS)
def _():
    unique_keys = SequenceMap(lambda x, i: x + i * 0.00001, tokens, indices)
    sorted_position = SelectorWidth(Select(unique_keys, unique_keys, Comparison.LT))
    return Aggregate(Select(sorted_position, indices, Comparison.EQ), tokens)


@case("case_81_compute_median", INTS)
def _():
    sorted_sequence = make_sort(tokens, tokens, max_seq_len=100, min_key=1)
    length = make_length()
    middle1 = Map(lambda x: (x - 1) // 2, length)
    middle2 = Map(lambda x: x // 2, length)
    median1 = Aggregate(Select(indices, middle1, Comparison.EQ), sorted_sequence)
    median2 = Aggregate(Select(indices, middle2, Comparison.EQ), sorted_sequence)
    return SequenceMap(lambda x, y: (x + y) / 2, median1, median2)


@case("case_88_average_first_last", INTS)
def _():
    first_elem_selector = Select(indices, indices, lambda x, y: x == 0)
    first_elem = Aggregate(first_elem_selector, tokens, default=None)
    reverser = SequenceMap(lambda x, y: y - x - 1, indices,
                           SelectorWidth(Select(indices, indices, Comparison.TRUE)))
    reverse_selector = Select(reverser, indices, Comparison.EQ)
    reversed_sequence = Aggregate(reverse_selector, tokens)
    last_elem = Aggregate(first_elem_selector, reversed_sequence, default=None)
    return SequenceMap(lambda x, y: (x + y) / 2.0, first_elem, last_elem)


def make_max_element():
    unique_tokens = SequenceMap(lambda x, y: x + y * 0.00000000000001, tokens, indices)
    leq_count = SelectorWidth(Select(unique_tokens, unique_tokens, Comparison.LEQ))
    max_element_selector = Select(leq_count, make_length(), Comparison.EQ)
    return Aggregate(max_element_selector, tokens)


@case("case_97_scale_by_max", INTS)
def _():
    return SequenceMap(lambda x, y: (x / y) if y > 0 else 0, tokens, make_max_element())


@case("case_98_max_element", INTS)
def _(): return make_max_element()


def shift_by_one():
    len_ = SelectorWidth(Select(indices, indices, Comparison.TRUE))
    shifted_selector = Select(indices, SequenceMap(lambda x, y: x if x < y - 1 else x - 1, indices, len_),
                              lambda x, y: x - 1 == y)
    return Aggregate(shifted_selector, tokens)


@case("case_99_sum_with_next", INTS)
def _(): return SequenceMap(lambda x, y: x + y if y != 0 else x, tokens, shift_by_one())


@case("case_112_difference_to_next", INTS)
def _(): return SequenceMap(lambda x, y: x - y, shift_by_one(), tokens)


@case("case_115_product_with_next", INTS)
def _(): return SequenceMap(lambda x, y: x * y, tokens, shift_by_one())


@case("case_110_insert_zeros", INTS)
def _():
    shifted = Aggregate(Select(indices, indices, lambda x, y: x == int(y / 2)), tokens)
    return SequenceMap(lambda x, y: x if y % 2 == 0 else 0, shifted, indices)


@case("case_113_invert_if_sorted", int_numbers(max=30))
def _():
    shifter = Select(indices, indices, lambda x, y: x == y - 1 or (x == 0 and y == 0))
    shifted = Aggregate(shifter, tokens)
    checks = SequenceMap(lambda x, y: 1 if x <= y else 0, shifted, tokens)
    zero_selector = Select(checks, Map(lambda x: 0, indices), Comparison.EQ)
    invert_decider = Map(lambda x: 1 if x > 0 else -1, SelectorWidth(zero_selector))
    avg_idx = Map(lambda x: x / 2 - 0.5, SelectorWidth(Select(indices, indices, Comparison.TRUE)))
    diff_to_avg_idx = SequenceMap(lambda x, y: x - y, indices, avg_idx)
    inverter = SequenceMap(lambda x, y: x + y, avg_idx,
                           SequenceMap(lambda x, y: x * y, invert_decider, diff_to_avg_idx))
    return Aggregate(Select(inverter, indices, Comparison.EQ), tokens)


@case("case_116_check_multiple_of_first", INTS, maxlen=11)
def _():
    first = Aggregate(Select(indices, Map(lambda x: 0, indices), Comparison.EQ), tokens)
    return SequenceMap(lambda x, y: (1 if x % y == 0 else 0) if y != 0 else 0, tokens, first)


@case("case_120_flip_halves", INTS)
def _():
    len_ = SelectorWidth(Select(indices, indices, Comparison.TRUE))
    half = Map(lambda x: x / 2, len_)
    new_positions = SequenceMap(lambda x, y: (x - y if x >= y else x + y) if y == int(y) else (
        x if x + 0.5 == y else (x + int(y) + 1 if x < y else x - int(y) - 1)), indices, half)
    return Aggregate(Select(new_positions, indices, Comparison.EQ), tokens)


@case("case_125_check_alternating", INTS)
def _():
    shifted_sequence = Aggregate(
        Select(indices, indices, lambda k, q: q == k + 1 or k == 1 and q == 0), tokens)
    shifted_even_odd = Map(lambda x: 1 if x % 2 == 0 else 0, shifted_sequence)
    even_odd = Map(lambda x: 1 if x % 2 == 1 else 0, tokens)
    checks = SequenceMap(lambda x, y: 1 if x == y else 0, shifted_even_odd, even_odd)
    zero_selector = Select(checks, Map(lambda x: 0, indices), Comparison.EQ)
    return Map(lambda x: 0 if x > 0 else 1, SelectorWidth(zero_selector))


@case("case_126_set_to_median", INTS)
def _():
    unique_tokens = SequenceMap(lambda x, y: x + 0.0001 * y, tokens, indices)
    target_pos = SelectorWidth(Select(unique_tokens, unique_tokens, Comparison.LT))
    sorted_sequence = Aggregate(Select(target_pos, indices, Comparison.EQ), tokens)
    length = make_length()
    mid_index1 = Map(lambda x: (x - 1) // 2, length)
    mid_index2 = Map(lambda x: x // 2, length)
    potential_median1 = Aggregate(Select(indices, mid_index1, Comparison.EQ), sorted_sequence)
    potential_median2 = Aggregate(Select(indices, mid_index2, Comparison.EQ), sorted_sequence)
    return SequenceMap(lambda x, y: (x + y) / 2, potential_median1, potential_median2)


@case("case_127_element_divide", INTS)
def _():
    first_elem = Aggregate(Select(indices, Map(lambda x: 0, indices), Comparison.EQ), tokens)
    len_ = SelectorWidth(Select(indices, indices, Comparison.TRUE))
    second_elem = Aggregate(Select(indices, Map(lambda x: 1 if x > 1 else 0, len_), Comparison.EQ), tokens)
    divisor = SequenceMap(lambda x, y: y / x if x != 0 and y != 0 else 1, first_elem, second_elem)
    return SequenceMap(lambda x, y: x / y, tokens, divisor)


# ---- words --------------------------------------------------------------------------------

@case("case_32_token_boundary_detector", words(min_chars=4, max_words=10))
def _():
    previous_token = shift_by(1, tokens)
    return SequenceMap(lambda x, y: x != y, tokens, previous_token)


@case("case_90_token_replacer", words() | {"findme", "-"})
def _(): return Map(lambda x: "-" if x == "findme" else x, tokens)


@case("case_11_word_count_by_length", words())
def _():
    word_length = Map(lambda x: len(x), tokens)
    length_selector = Select(word_length, word_length, Comparison.EQ)
    return Aggregate(length_selector, word_length, default=None)


@case("case_22_sort_by_length", words())
def _():
    token_length = Map(lambda x: len(x), tokens)
    return make_sort(tokens, token_length, max_seq_len=10, min_key=1)


@case("case_33_token_length_parity", words())
def _(): return Map(lambda x: len(x) % 2 == 0, tokens)


@case("case_20_spam_detector", words() | {"spam", "offer", "click", "now"})
def _():
    spam_keywords = {"free", "offer", "click", "now"}
    keyword_count = Map(lambda x: sum(x == keyword for keyword in spam_keywords), tokens)
    return Map(lambda x: "spam" if x > 0 else "not spam", keyword_count)


@case("case_36_emoji_sentiment", {"\U0001F60A", "\U0001F622", "\U0001F4D8"})  # 😊 😢 📘
def _():
    emoji_sentiments = {"\U0001F60A": "positive", "\U0001F622": "negative", "\U0001F4D8": "neutral"}
    return Map(lambda x: emoji_sentiments.get(x, "neutral"), tokens)


# ---- strings: slices, methods (docs/language.md, "Strings") -------------------------------

@case("case_10_symmetry_checker", words() | {"radar", "rotor"})
def _():
    # make_token_symmetry_checker: its first_half (shift_by(half_length, sop)) is built and
    # never used; the output reads sop and second_half only.
    half_length = Map(lambda x: len(x) // 2, tokens)
    second_half = SequenceMap(lambda x, y: x[:y] == x[:-y - 1:-1], tokens, half_length)
    return SequenceMap(lambda x, y: x if y else None, tokens, second_half)


@case("case_23_palindrome_spotter", words() | {"racecar", "noon"})
def _(): return Map(lambda x: x if x == x[::-1] else None, tokens)


@case("case_28_mirroring", words(min_chars=4, max_words=50))
def _(): return Map(lambda x: x[::-1] if x is not None else None, tokens)


@case("case_29_abbreviation", words())
def _(): return Map(lambda x: x[:3] if len(x) > 3 else x, tokens)


@case("case_30_numeric_range_tagging", str_numbers(min=0, max=30))
def _(): return Map(lambda x: 10 <= int(x) <= 20 if x.isdigit() else False, tokens)


@case("case_31_anagram", words() | {"listen"})
def _():
    sorted_target = sorted("listen")
    return Map(lambda x: sorted(x) == sorted_target, tokens)


def calc_ratio(word):
    vowels = sum(c in 'aeiou' for c in word.lower())
    consonants = len(word) - vowels
    return vowels / consonants if consonants != 0 else float('inf')


@case("case_34_vowel_ratio", words())
def _(): return Map(calc_ratio, tokens)


def alternate_capitalization(word):
    return ''.join(c.upper() if i % 2 == 0 else c.lower() for i, c in enumerate(word))


@case("case_35_capitalization", words())
def _(): return Map(alternate_capitalization, tokens)


@case("case_37_reversal_with_exclusion", words())
def _(): return Map(lambda x: x[::-1] if x != "nochange" else x, tokens)
