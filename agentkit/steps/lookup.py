"""Whether a request asks for what a model cannot know by itself: the present (``right now``, ``at the moment``,
``currently``) or a look-up (``search``, ``look it up``, ``online``, ``find out``).

A small model answers such a request from its weights with a guess ("Is it raining in Istanbul right now?" → "It's
raining in Istanbul."). Its raw call margin, the default on the loop adapter's weights (:func:`agentkit.decide.calibrates`),
holds back there; the calibrated margin calls there, and also on chat ("hey :)" called ``web_search``). A request
that asks for the present or a look-up in words is where the calibrated margin is trusted
(:mod:`agentkit.steps.decision`), and a request that asks for a look-up goes to a tool whose name says it searches
(:func:`searches`). ``today`` and ``tonight`` count too, though they name a calendar's day as well:
"how warm is it in lisbon today" calls ``get_calendar_events``. On the first decisions of the user-tool
benchmark's six splits read so far (``evals/user_tools_decide.py``), with them the decision called on 4 more of the
180 tasks that need a call and picked the right tool on 2 more, and held back where it had on the 96 that need none.

A request that asks to search, or asks for a fact recorded somewhere (:func:`asks_fact`: "how long is the amazon
river?", "when was bitcoin created", "louvre opening hours??"), calls a search tool when one is offered, whatever the
margin: a small model answers such a question with a guess, and held back on 12 of them in the splits read up to
``blind9``. A request that asks for advice or an explanation, or closes the conversation (:func:`asks_advice`:
"any tips for budgeting when you earn in one currency", "how do search engines decide", "nvm about the exchange
rate thing"), is answered where the raw margin would call, unless a tool is covered or it asks for the present, a
look-up or a fact: on the splits read up to ``blind9`` the raw margin called on 10 such requests that need no tool.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..constrain.names import name_words
from ..constrain.queries import asks_fact

__all__ = ["asks_advice", "asks_fact", "asks_lookup", "asks_present", "asks_search", "asks_to_search", "asks_writing",
           "request_of", "searches", "searches_it"]

_PRESENT = r"today|tonight|right now|(?<!for )(?<!not )now|rn|currently|at the moment|at present|current|latest|up to date"
_LOOKUP = (r"search(?!\s+(?:results?|engines?|bars?|history|operators?))|web search|look\s+(?:\w+\s+)?up|lookup|online"
           r"|google(?=\s+(?:it|that|this|for)\b)")  # "google it", not "my Google calendar"
_ASKS = re.compile(r"\b(?:" + _PRESENT + "|" + _LOOKUP + r"|find out)\b", re.IGNORECASE)
_SEARCH = re.compile(r"\b(?:" + _LOOKUP + r")\b", re.IGNORECASE)
_PRESENT_RE = re.compile(r"\b(?:" + _PRESENT + r")\b", re.IGNORECASE)
_SEARCH_TOOL = frozenset({"search", "lookup", "google", "browse"})


# a request to write something: "help me draft a quick note", "write a short toast", "translate this"
_WRITING = (r"help me (?:draft|write|word|phrase)|(?:draft|write) (?:me )?(?:a|an|the|my)\b|rephrase|reword|translate"
            r"|proofread")
_WRITING_RE = re.compile(r"\b(?:" + _WRITING + r")\b", re.IGNORECASE)
# advice, an explanation, or a conversation's close: what the model answers itself ("any tips for budgeting when you
# earn in one currency", "how do search engines decide", "nvm about the exchange rate thing")
_ADVICE = re.compile(r"(?:^|[.?!]\s*|\byou |\bu )(?:recommend|suggest|should i)\b|\b(?:what|how)(?: else)? should i\b"
                     r"|\b(?:explain|explanation|tips|any tip|advice|good way|best way|a trick|ideas|pros and cons"
                     r"|best time (?:of (?:the )?year )?to|do you think|your (?:general |honest )?(?:take|opinion|view)"
                     r"|which would you|would you (?:lean|go|pick|choose)|not asking (?:you )?(?:to|about|for)"
                     r"|what are (?:some|a few)|bye|goodbye|talk (?:to you )?(?:tomorrow|later|soon)|that's all"
                     r"|can i (?:just |still )?(?:use|substitute|swap)|will it (?:still )?work|instead of|substitut\w*|what (?:currency|currencies|language|languages)"
                     r" (?:do|does|is|are)|the capital (?:city )?of|" + _WRITING
                     + r"|what(?:'s| is) the (?:actual |real |main )?difference between|what do(?:es)? (?:they|it|that|people) mean|why (?:do|does|is|are|can't|cannot|don't)"
                     r"|how (?:do|does) (?!i\b|you\b|we\b)\w+(?: \w+)? (?:work|decide|get decided|know)"
                     r"|how (?:do|can|should|would) (?:i|you|we|one) (?:search|google|look up|find)"
                     r"|no worries|nvm|never mind|sorted it|appreciate|thanks|thank you|cheers)\b", re.IGNORECASE)


def asks_writing(request: str) -> bool:
    """Whether ``request`` asks the assistant to write, rephrase or translate something ("help me draft a quick note
    to the team"): what it names (a day, an amount) is the text's subject, not a look-up."""
    return bool(_WRITING_RE.search(request))


def asks_advice(request: str) -> bool:
    """Whether ``request`` asks for advice or an explanation, or closes the conversation, in words ("any tips for",
    "explain", "why does", "should I", "thanks"): a request the model answers itself unless its typed values fill a
    tool or it asks for the present, a look-up or a recorded fact."""
    return bool(_ADVICE.search(request))


# a search asked of the assistant: a search verb that starts a clause or follows "can you" ("look up the Louvre's
# hours", "can you search who won"), not one the request tells about ("I keep searching stuff online")
_ASKED_SEARCH = re.compile(r"(?:^|[.?!,;:]\s*|\b(?:can|could|would|will) (?:you|u) |\bpls |\bplease |\bthen |\band )"
                           r"(?:search|look|google|find|check)\b", re.IGNORECASE)


def asks_to_search(request: str) -> bool:
    """Whether ``request`` asks the assistant to search (:data:`_ASKED_SEARCH`): an advice request that tells of
    searching ("I keep searching stuff online and getting junk. any tips for writing better search queries?") is
    answered."""
    return bool(_ASKED_SEARCH.search(request))


# a search whose object is a pronoun: "Could you look it up and tell me", "search that for me"
_SEARCH_IT = re.compile(r"\b(?:look (?:it|that|this) up|search (?:for )?(?:it|that|this)|check (?:it|that))\b",
                        re.IGNORECASE)


def searches_it(request: str) -> bool:
    """Whether ``request`` asks to search for something it names by a pronoun ("I have a lunch on Thursday but I
    forgot which city it's in. Could you look it up"): where a tool is covered, the covered tool finds it."""
    return bool(_SEARCH_IT.search(request))


def asks_lookup(request: str) -> bool:
    """Whether ``request`` asks for the present or a look-up in words (the module's docstring says which)."""
    return bool(_ASKS.search(request))


def asks_present(request: str) -> bool:
    """Whether ``request`` asks for the present in words (``right now``, ``today``, ``currently``; not "not now")."""
    return bool(_PRESENT_RE.search(request))


def asks_search(request: str) -> bool:
    """Whether ``request`` asks for a look-up in words (``search``, ``look it up``, ``online``); ``find out`` asks
    for information, not a search ("find out which city my lunch on the 5th is in" reads the calendar), and a search
    the user tells of doing ("I'll search for a new laptop later tonight. What specs matter?") asks none."""
    return any(not _OWN_SEARCH.search(request[:m.start()]) for m in _SEARCH.finditer(request))


# the user's own search, told: "I'll search for", "I keep searching", "I already looked it up"
_OWN_SEARCH = re.compile(r"\bi(?:'ll| will| am going to|'m going to| keep| kept| tried| have been|'ve been| usually"
                         r"| always| already)\s+$", re.IGNORECASE)


def searches(tool: str) -> bool:
    """Whether a tool's name says it searches: a word of it is ``search``, ``lookup``, ``google`` or ``browse``
    (``web_search``, ``searchDocs``, ``google``), or it holds ``look`` and ``up`` (``look_up_word``)."""
    words = {w.lower() for w in name_words(tool)}
    return bool(words & _SEARCH_TOOL) or {"look", "up"} <= words


def request_of(chat: Sequence[dict[str, str]]) -> str:
    """The last user message of ``chat`` (empty when there is none)."""
    return next((m.get("content") or "" for m in reversed(chat) if m.get("role") == "user"), "")
