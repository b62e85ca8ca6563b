"""Toy repositories for the coding-assistant eval (``python -m agentkit.evals.coding``).

Each task: ``id``, ``task`` (what the agent is told), ``files`` (path -> content, copied to a fresh temp folder per
run) and ``check``: ``tests`` (the repository's pytest suite must pass), ``absent`` / ``present`` (regexes that
must not / must match some file after the run), ``docstring`` ("file.py:function" that must have a docstring).
Every repository's tests fail (or its check fails) before the fix, which the eval's own tests verify.
"""

TASKS = [
    {
        "id": "off_by_one",
        "task": "The test in test_stats.py fails. Fix the bug in stats.py so that the tests pass.",
        "files": {
            "stats.py": "def total(xs):\n    \"\"\"Sum of all the numbers in xs.\"\"\"\n    return sum(xs[1:])\n",
            "test_stats.py": "from stats import total\n\n\ndef test_total():\n    assert total([1, 2, 3]) == 6\n",
        },
        "check": {"tests": True},
    },
    {
        "id": "wrong_operator",
        "task": "is_even in parity.py returns the wrong answer. Fix it so that the tests pass.",
        "files": {
            "parity.py": "def is_even(n):\n    return n % 2 == 1\n",
            "test_parity.py": (
                "from parity import is_even\n\n\ndef test_is_even():\n    assert is_even(4)\n"
                "    assert not is_even(3)\n"
            ),
        },
        "check": {"tests": True},
    },
    {
        "id": "missing_return",
        "task": "double() in mathx.py returns None. Make it return twice its argument so the tests pass.",
        "files": {
            "mathx.py": "def double(x):\n    x * 2\n",
            "test_mathx.py": "from mathx import double\n\n\ndef test_double():\n    assert double(21) == 42\n",
        },
        "check": {"tests": True},
    },
    {
        "id": "typo_string",
        "task": "greeting() in greet.py has a typo in its message. Fix it so the tests pass.",
        "files": {
            "greet.py": "def greeting(name):\n    return \"Helo, \" + name + \"!\"\n",
            "test_greet.py": (
                "from greet import greeting\n\n\ndef test_greeting():\n"
                "    assert greeting(\"Ada\") == \"Hello, Ada!\"\n"
            ),
        },
        "check": {"tests": True},
    },
    {
        "id": "rename_function",
        "task": "Rename the function calc_area to area everywhere (its definition and every use). Keep the tests "
                "passing.",
        "files": {
            "shapes.py": "def calc_area(w, h):\n    return w * h\n",
            "report.py": "from shapes import calc_area\n\n\ndef describe(w, h):\n"
                         "    return f\"area={calc_area(w, h)}\"\n",
            "test_shapes.py": (
                "import shapes\nfrom report import describe\n\n\ndef test_area():\n"
                "    assert shapes.area(2, 3) == 6\n\n\ndef test_describe():\n"
                "    assert describe(2, 3) == \"area=6\"\n"
            ),
        },
        "check": {"tests": True, "absent": [r"\bcalc_area\b"]},
    },
    {
        "id": "add_docstring",
        "task": "Add a docstring to the function mean in stats.py saying what it returns.",
        "files": {
            "stats.py": "def mean(xs):\n    return sum(xs) / len(xs)\n",
            "test_stats.py": "from stats import mean\n\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n",
        },
        "check": {"tests": True, "docstring": "stats.py:mean"},
    },
]
