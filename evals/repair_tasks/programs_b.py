"""Small programs for the repair benchmark, part B."""

PROGRAMS = [
    {
        "name": "matrix",
        "module": '''def transpose(m):
    if not m:
        return []
    return [[row[i] for row in m] for i in range(len(m[0]))]


def matmul(a, b):
    rows, inner, cols = len(a), len(b), len(b[0])
    out = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        for j in range(cols):
            for k in range(inner):
                out[i][j] += a[i][k] * b[k][j]
    return out
''',
        "tests": '''from matrix import matmul, transpose


def test_transpose():
    assert transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]
    assert transpose([]) == []


def test_matmul():
    assert matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]]) == [[19, 22], [43, 50]]


def test_matmul_rect():
    assert matmul([[1, 2, 3]], [[1], [2], [3]]) == [[14]]
''',
    },
    {
        "name": "anagrams",
        "module": '''def group_anagrams(words):
    groups = {}
    for w in words:
        key = "".join(sorted(w))
        groups.setdefault(key, []).append(w)
    return sorted(sorted(g) for g in groups.values())


def is_anagram(a, b):
    return len(a) == len(b) and sorted(a) == sorted(b)
''',
        "tests": '''from anagrams import group_anagrams, is_anagram


def test_groups():
    assert group_anagrams(["eat", "tea", "tan", "ate", "nat", "bat"]) == [
        ["ate", "eat", "tea"], ["bat"], ["nat", "tan"]]


def test_is_anagram():
    assert is_anagram("listen", "silent")
    assert not is_anagram("abc", "abd")
    assert not is_anagram("ab", "abb")
''',
    },
    {
        "name": "stack_calc",
        "module": '''def rpn(expr):
    """Evaluate a space-separated reverse Polish expression of integers."""
    stack = []
    for tok in expr.split():
        if tok in ("+", "-", "*"):
            right = stack.pop()
            left = stack.pop()
            if tok == "+":
                stack.append(left + right)
            elif tok == "-":
                stack.append(left - right)
            else:
                stack.append(left * right)
        else:
            stack.append(int(tok))
    if len(stack) != 1:
        raise ValueError("malformed expression")
    return stack[0]
''',
        "tests": '''import pytest

from stack_calc import rpn


def test_add_mul():
    assert rpn("2 3 + 4 *") == 20


def test_sub_order():
    assert rpn("10 4 -") == 6
    assert rpn("3 4 5 * -") == -17


def test_malformed():
    with pytest.raises(ValueError):
        rpn("1 2")
''',
    },
    {
        "name": "balanced",
        "module": '''PAIRS = {")": "(", "]": "[", "}": "{"}


def balanced(text):
    """True when every bracket in text is closed in the right order."""
    stack = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in PAIRS:
            if not stack or stack.pop() != PAIRS[ch]:
                return False
    return len(stack) == 0
''',
        "tests": '''from balanced import balanced


def test_ok():
    assert balanced("([]{})")
    assert balanced("a(b)c")
    assert balanced("")


def test_bad():
    assert not balanced("(]")
    assert not balanced("((")
    assert not balanced(")(")
''',
    },
    {
        "name": "temperature",
        "module": '''def c_to_f(c):
    return c * 9 / 5 + 32


def f_to_c(f):
    return (f - 32) * 5 / 9


def classify(c):
    if c < 0:
        return "freezing"
    if c < 15:
        return "cold"
    if c <= 25:
        return "mild"
    return "hot"
''',
        "tests": '''from temperature import c_to_f, classify, f_to_c


def test_convert():
    assert c_to_f(100) == 212
    assert c_to_f(0) == 32
    assert f_to_c(212) == 100


def test_classify():
    assert classify(-3) == "freezing"
    assert classify(0) == "cold"
    assert classify(15) == "mild"
    assert classify(25) == "mild"
    assert classify(30) == "hot"
''',
    },
    {
        "name": "moving_average",
        "module": '''def moving_average(xs, window):
    if window <= 0 or window > len(xs):
        return []
    total = sum(xs[:window])
    out = [total / window]
    for i in range(window, len(xs)):
        total += xs[i] - xs[i - window]
        out.append(total / window)
    return out
''',
        "tests": '''from moving_average import moving_average


def test_basic():
    assert moving_average([1, 2, 3, 4, 5], 2) == [1.5, 2.5, 3.5, 4.5]


def test_full_window():
    assert moving_average([2, 4, 6], 3) == [4.0]


def test_bad_window():
    assert moving_average([1, 2], 3) == []
    assert moving_average([1, 2], 0) == []
''',
    },
    {
        "name": "histogram",
        "module": '''def histogram(values, bins, lo, hi):
    """Counts of values in bins equal-width bins over [lo, hi); values outside are ignored."""
    counts = [0] * bins
    width = (hi - lo) / bins
    for v in values:
        if v < lo or v >= hi:
            continue
        idx = int((v - lo) // width)
        counts[idx] += 1
    return counts
''',
        "tests": '''from histogram import histogram


def test_counts():
    assert histogram([0, 1, 2, 3, 4], 2, 0, 4) == [2, 2]


def test_outside_ignored():
    assert histogram([-1, 0, 9.99, 10], 5, 0, 10) == [1, 0, 0, 0, 1]


def test_empty():
    assert histogram([], 3, 0, 3) == [0, 0, 0]
''',
    },
    {
        "name": "intervals",
        "module": '''def merge_intervals(intervals):
    """Merge overlapping [start, end] intervals."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
''',
        "tests": '''from intervals import merge_intervals


def test_overlap():
    assert merge_intervals([[1, 3], [2, 6], [8, 10]]) == [[1, 6], [8, 10]]


def test_touching():
    assert merge_intervals([[1, 4], [4, 5]]) == [[1, 5]]


def test_contained_and_unsorted():
    assert merge_intervals([[5, 6], [1, 10], [2, 3]]) == [[1, 10]]
''',
    },
    {
        "name": "digits",
        "module": '''def digit_sum(n):
    n = abs(n)
    total = 0
    while n > 0:
        total += n % 10
        n //= 10
    return total


def digital_root(n):
    while n >= 10:
        n = digit_sum(n)
    return n
''',
        "tests": '''from digits import digit_sum, digital_root


def test_digit_sum():
    assert digit_sum(1234) == 10
    assert digit_sum(-56) == 11
    assert digit_sum(0) == 0


def test_digital_root():
    assert digital_root(9875) == 2
    assert digital_root(7) == 7
''',
    },
    {
        "name": "two_sum",
        "module": '''def two_sum(nums, target):
    """Indices (i, j), i < j, of two numbers adding up to target, or None."""
    seen = {}
    for j, x in enumerate(nums):
        need = target - x
        if need in seen:
            return seen[need], j
        seen[x] = j
    return None
''',
        "tests": '''from two_sum import two_sum


def test_found():
    assert two_sum([2, 7, 11, 15], 9) == (0, 1)
    assert two_sum([3, 2, 4], 6) == (1, 2)


def test_same_value():
    assert two_sum([3, 3], 6) == (0, 1)


def test_none():
    assert two_sum([1, 2], 10) is None
''',
    },
    {
        "name": "pascal",
        "module": '''def pascal_row(n):
    """Row n (from 0) of Pascal's triangle."""
    row = [1]
    for _ in range(n):
        row = [1] + [row[i] + row[i + 1] for i in range(len(row) - 1)] + [1]
    return row
''',
        "tests": '''from pascal import pascal_row


def test_rows():
    assert pascal_row(0) == [1]
    assert pascal_row(1) == [1, 1]
    assert pascal_row(4) == [1, 4, 6, 4, 1]


def test_sum():
    assert sum(pascal_row(10)) == 1024
''',
    },
    {
        "name": "vowels",
        "module": '''VOWELS = "aeiou"


def count_vowels(text):
    return sum(1 for c in text.lower() if c in VOWELS)


def strip_vowels(text):
    return "".join(c for c in text if c.lower() not in VOWELS)
''',
        "tests": '''from vowels import count_vowels, strip_vowels


def test_count():
    assert count_vowels("Programming") == 3
    assert count_vowels("xyz") == 0


def test_strip():
    assert strip_vowels("Education") == "dctn"
''',
    },
    {
        "name": "bank_account",
        "module": '''class Account:
    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("deposit must be positive")
        self.balance += amount
        return self.balance

    def withdraw(self, amount):
        if amount > self.balance:
            raise ValueError("insufficient funds")
        self.balance -= amount
        return self.balance
''',
        "tests": '''import pytest

from bank_account import Account


def test_deposit_withdraw():
    acc = Account("ann", 10)
    assert acc.deposit(5) == 15
    assert acc.withdraw(15) == 0


def test_overdraw():
    acc = Account("bob", 3)
    with pytest.raises(ValueError):
        acc.withdraw(4)


def test_bad_deposit():
    with pytest.raises(ValueError):
        Account("cy").deposit(0)
''',
    },
    {
        "name": "title_case",
        "module": '''SMALL = {"a", "an", "the", "of", "and", "in"}


def title_case(text):
    words = text.lower().split()
    out = []
    for i, w in enumerate(words):
        if i > 0 and w in SMALL:
            out.append(w)
        else:
            out.append(w[0].upper() + w[1:])
    return " ".join(out)
''',
        "tests": '''from title_case import title_case


def test_title():
    assert title_case("the lord of the rings") == "The Lord of the Rings"


def test_single():
    assert title_case("a") == "A"
    assert title_case("war AND peace") == "War and Peace"
''',
    },
    {
        "name": "fib",
        "module": '''def fib(n):
    """The n-th Fibonacci number (fib(0) == 0)."""
    if n < 0:
        raise ValueError("n must be >= 0")
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
''',
        "tests": '''import pytest

from fib import fib


def test_values():
    assert [fib(i) for i in range(8)] == [0, 1, 1, 2, 3, 5, 8, 13]


def test_big():
    assert fib(30) == 832040


def test_negative():
    with pytest.raises(ValueError):
        fib(-1)
''',
    },
]
