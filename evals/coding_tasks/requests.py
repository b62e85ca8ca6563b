"""Requests for the coding assistant's planner (``python -m agentkit.evals.coding_plan``), in other words than the
toy tasks'. Each names a toy repository of ``tasks.py`` (its files are the repository the planner sees), the
request, the route it should take (``rename``, ``docstring``, ``repair`` or ``agent``) and, for a rename or a
docstring, the values it needs.

``split``: ``dev`` requests were run once and the routing's fallback order was changed after seeing them (a model
``repair`` the request does not name no longer goes to the repair loop without a bug word); ``heldout`` requests
were written before that change and never used to tune anything.
"""

REQUESTS = [
    {"split": "dev", "repo": "rename_function", "request": "Please call calc_area just area from now on.",
     "route": "rename", "old_name": "calc_area", "new_name": "area"},
    {"split": "dev", "repo": "rename_function", "request": "Can you rename calc_area to compute_area?",
     "route": "rename", "old_name": "calc_area", "new_name": "compute_area"},
    {"split": "dev", "repo": "rename_function", "request": "Change the name of describe to summary everywhere.",
     "route": "rename", "old_name": "describe", "new_name": "summary"},
    {"split": "dev", "repo": "add_docstring", "request": "mean in stats.py has no documentation; write a docstring for it.",
     "route": "docstring", "function": "mean"},
    {"split": "dev", "repo": "add_docstring", "request": "Document what mean returns with a docstring.",
     "route": "docstring", "function": "mean"},
    {"split": "dev", "repo": "add_docstring", "request": "Give the mean function a short docstring.",
     "route": "docstring", "function": "mean"},
    {"split": "dev", "repo": "off_by_one", "request": "total([1, 2, 3]) gives 5 instead of 6, please fix it.", "route": "repair"},
    {"split": "dev", "repo": "typo_string", "request": "The greeting is misspelled and its test fails.", "route": "repair"},
    {"split": "dev", "repo": "wrong_operator", "request": "is_even(4) says False. Can you repair it?", "route": "repair"},
    {"split": "dev", "repo": "missing_return", "request": "Why does double give None? Make the tests pass.", "route": "repair"},
    {"split": "dev", "repo": "off_by_one", "request": "Add type hints to total.", "route": "agent"},
    {"split": "dev", "repo": "missing_return", "request": "Write a README for this project.", "route": "agent"},

    {"split": "heldout", "repo": "rename_function", "request": "rename describe to describe_area",
     "route": "rename", "old_name": "describe", "new_name": "describe_area"},
    {"split": "heldout", "repo": "rename_function", "request": "I'd like calc_area renamed to rect_area.",
     "route": "rename", "old_name": "calc_area", "new_name": "rect_area"},
    {"split": "heldout", "repo": "rename_function", "request": "Rename calc_area as area_of in every file.",
     "route": "rename", "old_name": "calc_area", "new_name": "area_of"},
    {"split": "heldout", "repo": "add_docstring", "request": "Please add a docstring to mean.",
     "route": "docstring", "function": "mean"},
    {"split": "heldout", "repo": "add_docstring", "request": "The function mean needs a docstring explaining its result.",
     "route": "docstring", "function": "mean"},
    {"split": "heldout", "repo": "off_by_one", "request": "Add a docstring to total in stats.py.",
     "route": "docstring", "function": "total"},
    {"split": "heldout", "repo": "typo_string", "request": "Fix the spelling in the message greeting returns.",
     "route": "repair"},
    {"split": "heldout", "repo": "wrong_operator", "request": "The parity check is broken for even numbers.",
     "route": "repair"},
    {"split": "heldout", "repo": "missing_return", "request": "double(21) should be 42 but the test fails.",
     "route": "repair"},
    {"split": "heldout", "repo": "off_by_one", "request": "Sum is off by one in total; repair it please.",
     "route": "repair"},
    {"split": "heldout", "repo": "typo_string", "request": "Translate the greeting to French.", "route": "agent"},
    {"split": "heldout", "repo": "wrong_operator", "request": "Explain what is_even does.", "route": "agent"},
]
