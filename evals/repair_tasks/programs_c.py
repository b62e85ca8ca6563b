"""Small programs for the repair benchmark, part C."""

PROGRAMS = [
    {
        "name": "queue_sim",
        "module": '''def wait_times(arrivals, service):
    """Wait of each customer at one counter: arrival times (sorted) and service durations."""
    free_at = 0
    waits = []
    for arrive, need in zip(arrivals, service):
        start = max(free_at, arrive)
        waits.append(start - arrive)
        free_at = start + need
    return waits
''',
        "tests": '''from queue_sim import wait_times


def test_no_wait():
    assert wait_times([0, 10], [5, 5]) == [0, 0]


def test_queue_builds():
    assert wait_times([0, 1, 2], [4, 4, 4]) == [0, 3, 6]


def test_empty():
    assert wait_times([], []) == []
''',
    },
    {
        "name": "grades",
        "module": '''def letter(score):
    if score >= 90:
        return "A"
    elif score >= 80:
        return "B"
    elif score >= 70:
        return "C"
    elif score >= 60:
        return "D"
    return "F"


def class_average(scores):
    if not scores:
        return 0.0
    return sum(scores) / len(scores)
''',
        "tests": '''from grades import class_average, letter


def test_letters():
    assert letter(95) == "A"
    assert letter(90) == "A"
    assert letter(89) == "B"
    assert letter(70) == "C"
    assert letter(60) == "D"
    assert letter(12) == "F"


def test_average():
    assert class_average([80, 90, 100]) == 90
    assert class_average([]) == 0.0
''',
    },
    {
        "name": "dedupe",
        "module": '''def dedupe(items):
    """items without repeats, first occurrence kept, order kept."""
    seen = set()
    out = []
    for x in items:
        if x in seen:
            continue
        seen.add(x)
        out.append(x)
    return out
''',
        "tests": '''from dedupe import dedupe


def test_keeps_order():
    assert dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]


def test_strings():
    assert dedupe(["a", "b", "a"]) == ["a", "b"]


def test_empty():
    assert dedupe([]) == []
''',
    },
    {
        "name": "power_set",
        "module": '''def power_set(items):
    subsets = [[]]
    for x in items:
        subsets = subsets + [s + [x] for s in subsets]
    return subsets
''',
        "tests": '''from power_set import power_set


def test_sizes():
    assert len(power_set([1, 2, 3])) == 8
    assert power_set([]) == [[]]


def test_contents():
    assert sorted(power_set(["a", "b"])) == [[], ["a"], ["a", "b"], ["b"]]
''',
    },
    {
        "name": "rotate",
        "module": '''def rotate_left(xs, k):
    if not xs:
        return []
    k = k % len(xs)
    return xs[k:] + xs[:k]


def rotate_right(xs, k):
    if not xs:
        return []
    return rotate_left(xs, len(xs) - k % len(xs))
''',
        "tests": '''from rotate import rotate_left, rotate_right


def test_left():
    assert rotate_left([1, 2, 3, 4], 1) == [2, 3, 4, 1]
    assert rotate_left([1, 2, 3], 4) == [2, 3, 1]


def test_right():
    assert rotate_right([1, 2, 3, 4], 1) == [4, 1, 2, 3]
    assert rotate_right([], 2) == []
''',
    },
    {
        "name": "leap_year",
        "module": '''def is_leap(year):
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0


def days_in_month(year, month):
    if month == 2:
        return 29 if is_leap(year) else 28
    if month in (4, 6, 9, 11):
        return 30
    return 31
''',
        "tests": '''from leap_year import days_in_month, is_leap


def test_leap():
    assert is_leap(2000)
    assert not is_leap(1900)
    assert is_leap(2024)
    assert not is_leap(2023)


def test_days():
    assert days_in_month(2024, 2) == 29
    assert days_in_month(2023, 2) == 28
    assert days_in_month(2023, 4) == 30
    assert days_in_month(2023, 1) == 31
''',
    },
    {
        "name": "kth_largest",
        "module": '''def kth_largest(nums, k):
    """The k-th largest number (k from 1)."""
    if k < 1 or k > len(nums):
        raise IndexError("k out of range")
    ordered = sorted(nums, reverse=True)
    return ordered[k - 1]
''',
        "tests": '''import pytest

from kth_largest import kth_largest


def test_kth():
    assert kth_largest([3, 2, 1, 5, 6, 4], 2) == 5
    assert kth_largest([3, 2, 1, 5, 6, 4], 1) == 6
    assert kth_largest([7], 1) == 7


def test_out_of_range():
    with pytest.raises(IndexError):
        kth_largest([1, 2], 3)
    with pytest.raises(IndexError):
        kth_largest([1, 2], 0)
''',
    },
    {
        "name": "inventory",
        "module": '''def restock(stock, orders, minimum):
    """Items whose stock after the orders is below minimum, with how many to buy to reach it."""
    to_buy = {}
    for item, qty in stock.items():
        left = qty - orders.get(item, 0)
        if left < minimum:
            to_buy[item] = minimum - left
    return to_buy
''',
        "tests": '''from inventory import restock


def test_restock():
    stock = {"apple": 10, "pear": 3, "fig": 5}
    orders = {"apple": 8, "fig": 1}
    assert restock(stock, orders, 4) == {"apple": 2, "pear": 1}


def test_nothing_needed():
    assert restock({"a": 9}, {}, 4) == {}
    assert restock({"a": 4}, {}, 4) == {}
''',
    },
    {
        "name": "linked_list",
        "module": '''class Node:
    def __init__(self, value, next=None):
        self.value = value
        self.next = next


def from_list(values):
    head = None
    for v in reversed(values):
        head = Node(v, head)
    return head


def to_list(head):
    out = []
    while head is not None:
        out.append(head.value)
        head = head.next
    return out


def reverse(head):
    prev = None
    while head is not None:
        head.next, prev, head = prev, head, head.next
    return prev
''',
        "tests": '''from linked_list import from_list, reverse, to_list


def test_round_trip():
    assert to_list(from_list([1, 2, 3])) == [1, 2, 3]
    assert to_list(from_list([])) == []


def test_reverse():
    assert to_list(reverse(from_list([1, 2, 3]))) == [3, 2, 1]
    assert to_list(reverse(from_list([7]))) == [7]
''',
    },
    {
        "name": "password_check",
        "module": '''def password_problems(pw):
    problems = []
    if len(pw) < 8:
        problems.append("too short")
    if not any(c.isdigit() for c in pw):
        problems.append("no digit")
    if not any(c.isupper() for c in pw):
        problems.append("no capital")
    if pw.lower() == pw[::-1].lower():
        problems.append("palindrome")
    return problems
''',
        "tests": '''from password_check import password_problems


def test_good():
    assert password_problems("Secret123") == []


def test_bad():
    assert password_problems("abc") == ["too short", "no digit", "no capital", "palindrome"] or \\
        password_problems("abc") == ["too short", "no digit", "no capital"]
    assert password_problems("abcdefgh1") == ["no capital"]
    assert password_problems("Abcdefghi") == ["no digit"]


def test_palindrome():
    assert password_problems("Abc1221cba") == ["palindrome"]
''',
    },
    {
        "name": "bits",
        "module": '''def count_bits(n):
    count = 0
    while n:
        count += n & 1
        n >>= 1
    return count


def is_power_of_two(n):
    return n > 0 and n & (n - 1) == 0
''',
        "tests": '''from bits import count_bits, is_power_of_two


def test_count():
    assert count_bits(0) == 0
    assert count_bits(7) == 3
    assert count_bits(8) == 1


def test_power():
    assert is_power_of_two(1)
    assert is_power_of_two(64)
    assert not is_power_of_two(0)
    assert not is_power_of_two(12)
''',
    },
    {
        "name": "spiral",
        "module": '''def spiral(m):
    """The elements of matrix m in clockwise spiral order."""
    out = []
    top, bottom, left, right = 0, len(m) - 1, 0, len(m[0]) - 1 if m else -1
    while top <= bottom and left <= right:
        for j in range(left, right + 1):
            out.append(m[top][j])
        top += 1
        for i in range(top, bottom + 1):
            out.append(m[i][right])
        right -= 1
        if top <= bottom:
            for j in range(right, left - 1, -1):
                out.append(m[bottom][j])
            bottom -= 1
        if left <= right:
            for i in range(bottom, top - 1, -1):
                out.append(m[i][left])
            left += 1
    return out
''',
        "tests": '''from spiral import spiral


def test_square():
    assert spiral([[1, 2, 3], [4, 5, 6], [7, 8, 9]]) == [1, 2, 3, 6, 9, 8, 7, 4, 5]


def test_rect():
    assert spiral([[1, 2, 3, 4], [5, 6, 7, 8]]) == [1, 2, 3, 4, 8, 7, 6, 5]


def test_column():
    assert spiral([[1], [2], [3]]) == [1, 2, 3]
    assert spiral([]) == []
''',
    },
    {
        "name": "shopping_cart",
        "module": '''def cart_total(items, discount_code=None):
    """items: (price, quantity) pairs. SAVE10 takes 10% off orders of 50 or more."""
    subtotal = 0
    for price, qty in items:
        subtotal += price * qty
    if discount_code == "SAVE10" and subtotal >= 50:
        subtotal = subtotal * 0.9
    return round(subtotal, 2)
''',
        "tests": '''from shopping_cart import cart_total


def test_plain():
    assert cart_total([(10, 2), (5, 1)]) == 25


def test_discount():
    assert cart_total([(25, 2)], "SAVE10") == 45.0
    assert cart_total([(20, 2)], "SAVE10") == 40


def test_other_code():
    assert cart_total([(30, 2)], "BOGUS") == 60
''',
    },
    {
        "name": "parse_duration",
        "module": '''UNITS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    """Seconds in a duration like "1h30m" or "45s"."""
    total = 0
    number = ""
    for ch in text:
        if ch.isdigit():
            number += ch
        elif ch in UNITS and number:
            total += int(number) * UNITS[ch]
            number = ""
        else:
            raise ValueError(f"bad duration: {text!r}")
    if number:
        raise ValueError(f"missing unit: {text!r}")
    return total
''',
        "tests": '''import pytest

from parse_duration import parse_duration


def test_parse():
    assert parse_duration("1h30m") == 5400
    assert parse_duration("45s") == 45
    assert parse_duration("2m5s") == 125


def test_bad():
    with pytest.raises(ValueError):
        parse_duration("10")
    with pytest.raises(ValueError):
        parse_duration("5x")
''',
    },
    {
        "name": "triangle",
        "module": '''def triangle_kind(a, b, c):
    sides = sorted([a, b, c])
    if sides[0] <= 0 or sides[0] + sides[1] <= sides[2]:
        return "invalid"
    if a == b == c:
        return "equilateral"
    if a == b or b == c or a == c:
        return "isosceles"
    return "scalene"
''',
        "tests": '''from triangle import triangle_kind


def test_kinds():
    assert triangle_kind(2, 2, 2) == "equilateral"
    assert triangle_kind(2, 2, 3) == "isosceles"
    assert triangle_kind(3, 2, 3) == "isosceles"
    assert triangle_kind(3, 4, 5) == "scalene"


def test_invalid():
    assert triangle_kind(1, 2, 3) == "invalid"
    assert triangle_kind(0, 1, 1) == "invalid"
''',
    },
]
