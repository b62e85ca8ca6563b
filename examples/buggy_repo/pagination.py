"""Splitting a list of results into pages, as a web app's list views do."""


def page_count(total, per_page=10):
    """How many pages ``total`` items fill."""
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    return (total + per_page - 1) // per_page


def page(items, number, per_page=10):
    """The items on page ``number`` (the first page is 1)."""
    if number < 1 or number > max(1, page_count(len(items), per_page)):
        raise IndexError(f"no page {number}")
    start = (number - 1) * per_page
    return items[start:start + per_page - 1]
