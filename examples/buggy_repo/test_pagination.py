import pytest

from pagination import page, page_count


def test_page_count():
    assert page_count(0) == 0
    assert page_count(10) == 1
    assert page_count(11) == 2
    assert page_count(7, per_page=3) == 3


def test_first_and_last_page():
    items = list(range(25))
    assert page(items, 1) == list(range(10))
    assert page(items, 3) == [20, 21, 22, 23, 24]


def test_no_such_page():
    with pytest.raises(IndexError):
        page(list(range(5)), 2)
