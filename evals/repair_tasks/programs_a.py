"""Small programs for the repair benchmark, part A: each a module of plain functions and its pytest file."""

PROGRAMS = [
    {
        "name": "binary_search",
        "module": '''def binary_search(items, target):
    """Index of target in the sorted list items, or -1."""
    lo, hi = 0, len(items) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if items[mid] == target:
            return mid
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
''',
        "tests": '''from binary_search import binary_search


def test_found():
    assert binary_search([1, 3, 5, 7, 9], 7) == 3
    assert binary_search([1, 3, 5, 7, 9], 1) == 0
    assert binary_search([1, 3, 5, 7, 9], 9) == 4


def test_missing():
    assert binary_search([1, 3, 5, 7, 9], 4) == -1
    assert binary_search([], 4) == -1


def test_single():
    assert binary_search([2], 2) == 0
''',
    },
    {
        "name": "running_max",
        "module": '''def running_max(values):
    out = []
    best = None
    for v in values:
        if best is None or v > best:
            best = v
        out.append(best)
    return out
''',
        "tests": '''from running_max import running_max


def test_increasing():
    assert running_max([1, 2, 3]) == [1, 2, 3]


def test_mixed():
    assert running_max([3, 1, 4, 1, 5]) == [3, 3, 4, 4, 5]


def test_negative():
    assert running_max([-5, -7, -2]) == [-5, -5, -2]


def test_empty():
    assert running_max([]) == []
''',
    },
    {
        "name": "word_count",
        "module": '''def word_count(text):
    """How many times each lowercased word appears in text."""
    counts = {}
    for word in text.lower().split():
        word = word.strip(".,!?")
        if not word:
            continue
        counts[word] = counts.get(word, 0) + 1
    return counts
''',
        "tests": '''from word_count import word_count


def test_simple():
    assert word_count("a b a") == {"a": 2, "b": 1}


def test_case_and_punctuation():
    assert word_count("Hello, hello! World.") == {"hello": 2, "world": 1}


def test_only_punctuation():
    assert word_count("... !!") == {}
''',
    },
    {
        "name": "fizzbuzz",
        "module": '''def fizzbuzz(n):
    result = []
    for i in range(1, n + 1):
        if i % 15 == 0:
            result.append("FizzBuzz")
        elif i % 3 == 0:
            result.append("Fizz")
        elif i % 5 == 0:
            result.append("Buzz")
        else:
            result.append(str(i))
    return result
''',
        "tests": '''from fizzbuzz import fizzbuzz


def test_first_five():
    assert fizzbuzz(5) == ["1", "2", "Fizz", "4", "Buzz"]


def test_fifteen():
    assert fizzbuzz(15)[-1] == "FizzBuzz"
    assert len(fizzbuzz(15)) == 15


def test_zero():
    assert fizzbuzz(0) == []
''',
    },
    {
        "name": "is_palindrome",
        "module": '''def is_palindrome(s):
    """True when s reads the same both ways, ignoring case and non-letters."""
    letters = [c.lower() for c in s if c.isalnum()]
    i, j = 0, len(letters) - 1
    while i < j:
        if letters[i] != letters[j]:
            return False
        i += 1
        j -= 1
    return True
''',
        "tests": '''from is_palindrome import is_palindrome


def test_yes():
    assert is_palindrome("A man, a plan, a canal: Panama")
    assert is_palindrome("abba")
    assert is_palindrome("")


def test_no():
    assert not is_palindrome("abca")
    assert not is_palindrome("ab")
''',
    },
    {
        "name": "merge_sorted",
        "module": '''def merge_sorted(a, b):
    """Merge two sorted lists into one sorted list."""
    i = j = 0
    out = []
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    out.extend(a[i:])
    out.extend(b[j:])
    return out
''',
        "tests": '''from merge_sorted import merge_sorted


def test_interleaved():
    assert merge_sorted([1, 4, 6], [2, 3, 7]) == [1, 2, 3, 4, 6, 7]


def test_one_empty():
    assert merge_sorted([], [1, 2]) == [1, 2]
    assert merge_sorted([3], []) == [3]


def test_duplicates():
    assert merge_sorted([1, 2], [2, 2]) == [1, 2, 2, 2]
''',
    },
    {
        "name": "gcd",
        "module": '''def gcd(a, b):
    while b != 0:
        a, b = b, a % b
    return abs(a)


def lcm(a, b):
    if a == 0 or b == 0:
        return 0
    return abs(a * b) // gcd(a, b)
''',
        "tests": '''from gcd import gcd, lcm


def test_gcd():
    assert gcd(12, 18) == 6
    assert gcd(7, 5) == 1
    assert gcd(0, 9) == 9


def test_lcm():
    assert lcm(4, 6) == 12
    assert lcm(0, 3) == 0
    assert lcm(5, 7) == 35
''',
    },
    {
        "name": "chunks",
        "module": '''def chunks(items, size):
    """Split items into lists of at most size elements."""
    if size <= 0:
        raise ValueError("size must be positive")
    out = []
    for start in range(0, len(items), size):
        out.append(items[start:start + size])
    return out
''',
        "tests": '''import pytest

from chunks import chunks


def test_even():
    assert chunks([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


def test_ragged():
    assert chunks([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_bad_size():
    with pytest.raises(ValueError):
        chunks([1], 0)
''',
    },
    {
        "name": "roman",
        "module": '''NUMERALS = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
            (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def to_roman(n):
    if n <= 0:
        raise ValueError("only positive numbers")
    out = ""
    for value, letters in NUMERALS:
        while n >= value:
            out += letters
            n -= value
    return out
''',
        "tests": '''import pytest

from roman import to_roman


def test_small():
    assert to_roman(3) == "III"
    assert to_roman(4) == "IV"
    assert to_roman(9) == "IX"


def test_big():
    assert to_roman(1994) == "MCMXCIV"
    assert to_roman(2024) == "MMXXIV"


def test_zero():
    with pytest.raises(ValueError):
        to_roman(0)
''',
    },
    {
        "name": "flatten",
        "module": '''def flatten(nested):
    """All the non-list items of a nested list, in order."""
    out = []
    for item in nested:
        if isinstance(item, list):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out
''',
        "tests": '''from flatten import flatten


def test_flat():
    assert flatten([1, 2]) == [1, 2]


def test_nested():
    assert flatten([1, [2, [3, 4]], 5]) == [1, 2, 3, 4, 5]


def test_empty_lists():
    assert flatten([[], [[]], 1]) == [1]
''',
    },
    {
        "name": "caesar",
        "module": '''def shift_letter(c, k):
    if not c.isalpha():
        return c
    base = ord("a") if c.islower() else ord("A")
    return chr((ord(c) - base + k) % 26 + base)


def caesar(text, k):
    return "".join(shift_letter(c, k) for c in text)
''',
        "tests": '''from caesar import caesar


def test_shift():
    assert caesar("abc", 1) == "bcd"
    assert caesar("xyz", 3) == "abc"


def test_case_and_symbols():
    assert caesar("Hello, World!", 13) == "Uryyb, Jbeyq!"


def test_round_trip():
    assert caesar(caesar("Secret", 5), -5) == "Secret"
''',
    },
    {
        "name": "median",
        "module": '''def median(values):
    if not values:
        raise ValueError("median of an empty list")
    s = sorted(values)
    mid = len(s) // 2
    if len(s) % 2 == 1:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2
''',
        "tests": '''import pytest

from median import median


def test_odd():
    assert median([3, 1, 2]) == 2
    assert median([5]) == 5


def test_even():
    assert median([4, 1, 3, 2]) == 2.5


def test_empty():
    with pytest.raises(ValueError):
        median([])
''',
    },
    {
        "name": "bubble_sort",
        "module": '''def bubble_sort(items):
    xs = list(items)
    n = len(xs)
    for i in range(n):
        swapped = False
        for j in range(n - 1 - i):
            if xs[j] > xs[j + 1]:
                xs[j], xs[j + 1] = xs[j + 1], xs[j]
                swapped = True
        if not swapped:
            break
    return xs
''',
        "tests": '''from bubble_sort import bubble_sort


def test_sorts():
    assert bubble_sort([5, 2, 9, 1, 5, 6]) == [1, 2, 5, 5, 6, 9]


def test_sorted_and_reversed():
    assert bubble_sort([1, 2, 3]) == [1, 2, 3]
    assert bubble_sort([3, 2, 1]) == [1, 2, 3]


def test_does_not_mutate():
    data = [2, 1]
    bubble_sort(data)
    assert data == [2, 1]
''',
    },
    {
        "name": "prime_sieve",
        "module": '''def primes_up_to(n):
    """All primes <= n (sieve of Eratosthenes)."""
    if n < 2:
        return []
    is_prime = [True] * (n + 1)
    is_prime[0] = is_prime[1] = False
    for p in range(2, int(n ** 0.5) + 1):
        if is_prime[p]:
            for m in range(p * p, n + 1, p):
                is_prime[m] = False
    return [i for i, ok in enumerate(is_prime) if ok]
''',
        "tests": '''from prime_sieve import primes_up_to


def test_small():
    assert primes_up_to(10) == [2, 3, 5, 7]


def test_edges():
    assert primes_up_to(1) == []
    assert primes_up_to(2) == [2]
    assert primes_up_to(25)[-1] == 23


def test_count():
    assert len(primes_up_to(100)) == 25
''',
    },
    {
        "name": "rle",
        "module": '''def encode(text):
    """Run-length encoding: "aaab" -> [("a", 3), ("b", 1)]."""
    runs = []
    for ch in text:
        if runs and runs[-1][0] == ch:
            runs[-1] = (ch, runs[-1][1] + 1)
        else:
            runs.append((ch, 1))
    return runs


def decode(runs):
    return "".join(ch * count for ch, count in runs)
''',
        "tests": '''from rle import decode, encode


def test_encode():
    assert encode("aaab") == [("a", 3), ("b", 1)]
    assert encode("") == []


def test_encode_alternating():
    assert encode("abab") == [("a", 1), ("b", 1), ("a", 1), ("b", 1)]


def test_round_trip():
    assert decode(encode("zzzyyx")) == "zzzyyx"
''',
    },
]
