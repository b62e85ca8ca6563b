"""Training data the project makes itself (see DATA.md): synthetic tool calls and extractions, self-distilled text.

Every example is a chat prompt plus an answer given as *segments* ``(text, pinned)``: pinned segments are the
structural JSON a template would place (``{"name":"f","arguments":{"city":``), the others are values the model
writes. Segments are tokenized one by one, as the constrained decoder does (pinned text is forced as its own
tokens, values are sampled), so each answer token knows whether it is pinned.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..constrain.nodes import Lit, Slot, Template, seq
from ..evals.bfcl import PLAIN_PROMPT
from .specs import random_function, request

# The BFCL eval's plain system prompt: the shipped adapter was distilled on it (model card), and this data must
# keep reproducing that run (tests/training/test_data.py). The eval's default now adds a worked example
# (agentkit.evals.bfcl.SYSTEM_PROMPT); a new distillation run should train on that and update the card and digests.
TOOL_SYSTEM = PLAIN_PROMPT
EXTRACT_SYSTEM = (
    "Extract the requested fields from the user's text. Reply with one JSON object matching this schema:\n{schema}\n"
    "Reply with the JSON only."
)
VALUE_REGEX = {
    "string": r'"[^"\\\x00-\x1f]*"', "integer": r"-?(?:0|[1-9][0-9]*)",
    "number": r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?", "boolean": r"true|false",
    "array": r'\[(?:"[^"\\\x00-\x1f]*"(?:,"[^"\\\x00-\x1f]*")*)?\]',
    "integer_array": r"\[(?:-?(?:0|[1-9][0-9]*)(?:,-?(?:0|[1-9][0-9]*))*)?\]",
    "number_array": r"\[(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:,-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?)*)?\]",
}


def value_type(v: object) -> str:
    """The ``VALUE_REGEX`` key of a JSON value of the synthetic data."""
    if isinstance(v, list):
        if v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return "integer_array"
        return "number_array" if v and all(isinstance(x, (int, float)) for x in v) else "array"
    return {bool: "boolean", int: "integer", float: "number"}.get(type(v), "string")

CITIES = ["Paris", "Boston", "Tokyo", "Berlin", "Madrid", "Cairo", "Lima", "Oslo", "Denver", "Seoul", "Nairobi",
          "Toronto", "Sydney", "Mumbai", "Dublin", "Austin", "Rome", "Vienna", "Chicago", "London", "San Francisco"]
NAMES = ["Alice", "Bob", "Carmen", "David", "Elena", "Farid", "Grace", "Hiro", "Ines", "John", "Kofi", "Lena",
         "Maria Lopez", "Noah Smith", "Olga", "Priya Patel", "Quentin", "Rosa", "Sam Lee", "Tariq"]
JOBS = ["nurse", "teacher", "engineer", "pilot", "chef", "lawyer", "farmer", "designer", "doctor", "writer"]
TOPICS = ["sports", "politics", "science", "technology", "health", "music", "finance", "travel", "movies"]
GENRES = ["comedy", "drama", "horror", "action", "romance", "thriller", "documentary", "animation"]
CUISINES = ["Italian", "Thai", "Mexican", "Indian", "Japanese", "French", "Greek", "Korean"]
CURRENCIES = ["USD", "EUR", "JPY", "GBP", "CAD", "AUD", "CHF", "INR"]
LANGS = ["French", "Spanish", "German", "Japanese", "Italian", "Portuguese", "Chinese"]
SYMBOLS = ["AAPL", "MSFT", "GOOG", "TSLA", "AMZN", "NVDA", "IBM", "META"]
PHRASES = ["good morning", "where is the station", "thank you very much", "I love this city", "see you tomorrow"]
SHAPES = ["rectangle", "triangle", "circle", "square"]
DATES = ["2024-03-15", "2024-07-01", "2025-01-20", "2024-12-24", "2025-05-05"]
TIMES = ["9am", "noon", "6:30pm", "tomorrow at 8", "in two hours"]


def _val(kind: str, r: random.Random):
    gen = {"int": lambda: r.randint(1, 500), "small": lambda: r.randint(1, 9), "age": lambda: r.randint(18, 80),
           "num": lambda: round(r.uniform(1, 300), 1), "year": lambda: r.randint(1970, 2024),
           "bool": lambda: r.random() < 0.5}.get(kind)
    return gen() if gen else r.choice(POOLS[kind])


POOLS = {"city": CITIES, "name": NAMES, "job": JOBS, "topic": TOPICS, "genre": GENRES, "cuisine": CUISINES,
         "cur": CURRENCIES, "lang": LANGS, "sym": SYMBOLS, "phrase": PHRASES, "shape": SHAPES, "date": DATES,
         "time": TIMES, "unit": ["celsius", "fahrenheit"], "mode": ["driving", "walking", "cycling", "transit"]}
JSON_TYPE = {"int": "integer", "age": "integer", "small": "integer", "year": "integer", "num": "number", "bool": "boolean"}


@dataclass(frozen=True)
class FnSpec:
    """A function: ``params`` are ``(name, value kind, description, required)``; ``requests`` are user requests
    whose ``{param}`` fields name the arguments of the answer (an optional parameter absent from a request is
    absent from its call)."""

    name: str
    description: str
    params: tuple[tuple[str, str, str, bool], ...]
    requests: tuple[str, ...]

    def schema(self) -> dict:
        props = {}
        for p, kind, desc, _ in self.params:
            props[p] = {"type": JSON_TYPE.get(kind, "string"), "description": desc}
            if kind in ("unit", "mode", "shape"):
                props[p]["enum"] = POOLS[kind]
        return {"type": "object", "properties": props, "required": [p for p, _, _, req in self.params if req]}


FUNCTIONS = [
    FnSpec("get_weather", "Get the current weather for a city.",
           (("city", "city", "City name", True), ("unit", "unit", "Temperature unit", False)),
           ("What's the weather like in {city}?", "Tell me the temperature in {city} in {unit}.",
            "Is it raining in {city} right now? Use {unit}.")),
    FnSpec("calculate_area", "Calculate the area of a shape.",
           (("shape", "shape", "The shape", True), ("width", "int", "Width in units", True),
            ("height", "int", "Height in units", True)),
           ("Find the area of a {shape} with width {width} and height {height}.",
            "What is the area of a {shape} that is {width} wide and {height} tall?")),
    FnSpec("book_flight", "Book a flight between two cities.",
           (("origin", "city", "Departure city", True), ("destination", "city", "Arrival city", True),
            ("date", "date", "Travel date (YYYY-MM-DD)", True), ("passengers", "small", "Number of passengers", False)),
           ("Book a flight from {origin} to {destination} on {date}.",
            "I need {passengers} seats from {origin} to {destination} on {date}.")),
    FnSpec("convert_currency", "Convert an amount between currencies.",
           (("amount", "num", "Amount to convert", True), ("from_currency", "cur", "Source currency", True),
            ("to_currency", "cur", "Target currency", True)),
           ("Convert {amount} {from_currency} to {to_currency}.",
            "How much is {amount} {from_currency} in {to_currency}?")),
    FnSpec("get_stock_price", "Get the latest price of a stock.",
           (("symbol", "sym", "Ticker symbol", True),), ("What is {symbol} trading at?", "Price of {symbol} stock?")),
    FnSpec("translate_text", "Translate text into another language.",
           (("text", "phrase", "Text to translate", True), ("target_language", "lang", "Target language", True)),
           ("Translate '{text}' into {target_language}.", "How do you say {text} in {target_language}?")),
    FnSpec("find_restaurants", "Find restaurants near a location.",
           (("location", "city", "City", True), ("cuisine", "cuisine", "Type of food", False),
            ("max_price", "int", "Maximum price per person", False)),
           ("Find {cuisine} restaurants in {location}.", "Any places to eat in {location} under {max_price} dollars?",
            "I want {cuisine} food in {location} for less than {max_price}.")),
    FnSpec("calculate_bmi", "Calculate body mass index.",
           (("weight", "num", "Weight in kg", True), ("height", "num", "Height in cm", True)),
           ("My weight is {weight} kg and my height is {height} cm. What's my BMI?",)),
    FnSpec("get_news", "Get news headlines on a topic.",
           (("topic", "topic", "News topic", True), ("limit", "small", "How many headlines", False)),
           ("Show me the latest {topic} news.", "Give me {limit} headlines about {topic}.")),
    FnSpec("find_movies", "Find movies by genre and year.",
           (("genre", "genre", "Movie genre", True), ("year", "year", "Release year", False)),
           ("Recommend some {genre} movies.", "List {genre} films released in {year}.")),
    FnSpec("get_distance", "Get the travel distance between two places.",
           (("origin", "city", "Start", True), ("destination", "city", "End", True),
            ("mode", "mode", "Travel mode", False)),
           ("How far is {destination} from {origin}?", "Distance from {origin} to {destination} by {mode}?")),
    FnSpec("set_reminder", "Set a reminder.",
           (("message", "phrase", "Reminder text", True), ("time", "time", "When", True)),
           ("Remind me to say '{message}' {time}.", "Set a reminder '{message}' for {time}.")),
    FnSpec("calculate_factorial", "Compute the factorial of a number.",
           (("number", "small", "The number", True),), ("What is the factorial of {number}?", "Compute {number}!")),
    FnSpec("search_hotels", "Search hotels in a city.",
           (("city", "city", "City", True), ("pets_allowed", "bool", "Allow pets", False),
            ("max_price", "int", "Max price per night", False)),
           ("Find hotels in {city} that allow pets: {pets_allowed}.", "Hotels in {city} under {max_price} a night.")),
]
EXTRACT_FIELDS = (("name", "name"), ("age", "age"), ("job", "job"), ("city", "city"))
EXTRACT_TEXTS = (
    "{name} is a {age}-year-old {job} who lives in {city}.",
    "Meet {name}, {age}, a {job} from {city}.",
    "Our new {job}, {name}, moved to {city} at the age of {age}.",
)


@dataclass
class Example:
    """A chat prompt and its answer as ``(text, pinned)`` segments; ``kind``: call | extract | free."""

    messages: list[dict[str, str]]
    segments: list[tuple[str, bool]]
    kind: str = "call"
    slot_regex: list[str] = field(default_factory=list)  # regex of each unpinned segment (for templates)

    @property
    def answer(self) -> str:
        return "".join(t for t, _ in self.segments)

    def template(self) -> Template:
        """The answer's canvas template: pinned text as ``Lit``, each value a typed ``Slot``."""
        regexes = iter(self.slot_regex)
        nodes = [Lit(t) if pin else Slot(next(regexes, VALUE_REGEX["string"]), name=str(i))
                 for i, (t, pin) in enumerate(self.segments)]
        return Template(root=seq(*nodes), kind="json")


def _json_segments(head: str, args: list[tuple[str, object, bool]]) -> tuple[list[tuple[str, bool]], list[str]]:
    """Compact canonical JSON ``head{"k":v,...}``: keys of required args are pinned, keys of optional ones are not
    (the compiler makes an optional property a choice the model takes). Returns segments and the regex of each
    unpinned segment."""
    segs: list[tuple[str, bool]] = [(head, True)] if head else []
    regexes: list[str] = []
    for i, (k, v, required) in enumerate(args):
        key = ("{" if i == 0 else ",") + json.dumps(k) + ":"
        if i == 0 and not required:
            segs.append(("{", True))
            key = key[1:]
        segs.append((key, required))
        if not required:
            regexes.append(re.escape(key))
        segs.append((json.dumps(v, ensure_ascii=False, separators=(",", ":")), False))
        regexes.append(VALUE_REGEX[value_type(v)])
    segs.append(("}" if args else "{}", True))
    return segs, regexes


def tool_call(r: random.Random, distractors: int = 0) -> Example:
    fn = r.choice(FUNCTIONS)
    request = r.choice(fn.requests)
    values = {p: _val(kind, r) for p, kind, _, _ in fn.params}
    if values.get("origin") is not None and values.get("origin") == values.get("destination"):
        values["destination"] = r.choice([c for c in CITIES if c != values["origin"]])
    present = [(p, values[p], req) for p, _, _, req in fn.params if "{" + p + "}" in request or req]
    fmt = {p: (str(v).lower() if isinstance(v, bool) else v) for p, v in values.items()}
    fns = [fn] + r.sample([f for f in FUNCTIONS if f is not fn], distractors)
    return _call_example(fns, fn.name, present, lambda: request.format(**fmt), r)


def _call_example(fns: list, name: str, present: list[tuple[str, object, bool]], say: Callable[[], str],
                  r: random.Random) -> Example:
    """The prompt listing ``fns`` (shuffled) and the answer: a call to ``name`` with ``present`` arguments; the
    request is made by ``say()`` after the shuffle (the order of draws from ``r`` fixes the data of a seed)."""
    r.shuffle(fns)
    listing = "\n".join(json.dumps({"name": f.name, "description": f.description, "parameters": f.schema()})
                        for f in fns)
    system = TOOL_SYSTEM.format(s="s" if len(fns) > 1 else "", functions=listing)
    segs, types = _json_segments('{"name":' + json.dumps(name) + ',"arguments":', present)
    segs.append(("}", True))
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": say()}]
    return Example(msgs, _merge(segs), "call", types)


def generated_call(r: random.Random, distractors: int = 0) -> Example:
    """A call to a procedurally generated function (:mod:`.specs`): varied names, parameter types and arrays."""
    fn = random_function(r)
    values = {p.name: p.value(r) for p in fn.params if p.required or r.random() < 0.5}
    present = [(p.name, values[p.name], p.required) for p in fn.params if p.name in values]
    fns = [fn] + [random_function(r) for _ in range(distractors)]
    return _call_example(fns, fn.name, present, lambda: request(fn, values, r), r)


def extraction(r: random.Random) -> Example:
    vals = {k: _val(kind, r) for k, kind in EXTRACT_FIELDS}
    schema = {"type": "object", "properties": {k: {"type": JSON_TYPE.get(kind, "string")} for k, kind in EXTRACT_FIELDS},
              "required": [k for k, _ in EXTRACT_FIELDS]}
    segs, types = _json_segments("", [(k, vals[k], True) for k, _ in EXTRACT_FIELDS])
    msgs = [{"role": "system", "content": EXTRACT_SYSTEM.format(schema=json.dumps(schema))},
            {"role": "user", "content": r.choice(EXTRACT_TEXTS).format(**vals)}]
    return Example(msgs, _merge(segs), "extract", types)


def _merge(segs: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    out: list[tuple[str, bool]] = []
    for t, p in segs:
        if out and p and out[-1][1]:
            out[-1] = (out[-1][0] + t, True)
        else:
            out.append((t, p))
    return out


def synthetic(n: int, seed: int = 0, extract_frac: float = 0.25, max_distractors: int = 2,
              generated_frac: float = 0.0) -> list[Example]:
    """``n`` synthetic examples (deterministic in ``seed``): extractions (``extract_frac``), calls to the
    hand-written ``FUNCTIONS``, and (``generated_frac`` of the calls) calls to generated functions."""
    r = random.Random(seed)

    def call() -> Example:
        k = r.randint(0, max_distractors)
        return generated_call(r, k) if generated_frac and r.random() < generated_frac else tool_call(r, k)

    return [extraction(r) if r.random() < extract_frac else call() for _ in range(n)]


DISTILL_PROMPTS = [
    "Explain what a function call is in one paragraph.", "Write a short note thanking a colleague.",
    "What is the capital of France?", "Give three tips for staying focused.", "Describe a cat in two sentences.",
    "What is JSON used for?", "Summarize why sleep is important.", "Write a haiku about rain.",
    "How do I boil an egg?", "What does an API do?", "Name some uses of Python.", "Why is the sky blue?",
]


def distill(lm, prompts: list[str], cache: Path, max_new_tokens: int = 64) -> list[Example]:
    """Self-distilled free text: the model's own greedy AR replies to ``prompts``, cached as JSONL in ``cache``
    (prompts already there are not regenerated)."""
    from ..config import DecodeConfig
    from ..engine.engine import Engine

    cache = Path(cache)
    done: dict[str, str] = {}
    if cache.is_file():
        for line in cache.read_text().splitlines():
            rec = json.loads(line)
            done[rec["prompt"]] = rec["reply"]
    todo = [p for p in prompts if p not in done]
    if todo:
        engine = Engine.from_loaded(lm)
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("a") as f:
            for p in todo:
                res = engine.generate(p, DecodeConfig(mode="ar", max_new_tokens=max_new_tokens))
                done[p] = res.text
                f.write(json.dumps({"prompt": p, "reply": res.text}) + "\n")
    return [Example([{"role": "user", "content": p}], [(done[p], False)], "free") for p in prompts if done[p].strip()]


@dataclass
class Tokenized:
    prompt: list[int]
    answer: list[int]  # ends with EOS
    pinned: list[bool]
    # consistency targets (distill.py): canvas states of the sampler's own trajectory for the block that starts
    # at answer position ``state_start``; a row made from one maps that state to the answer
    states: list[list[int]] = field(default_factory=list)
    state_start: int = 0


def tokenize(ex: Example, tokenizer, eos_id: int, chat: bool = True) -> Tokenized:
    if chat and getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(ex.messages, add_generation_prompt=True, tokenize=True)
        prompt = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    else:
        prompt = tokenizer.encode("\n".join(m["content"] for m in ex.messages) + "\n", add_special_tokens=False)
    answer: list[int] = []
    pinned: list[bool] = []
    for text, pin in ex.segments:
        toks = tokenizer.encode(text, add_special_tokens=False)
        answer += toks
        pinned += [pin] * len(toks)
    return Tokenized(prompt, answer + [eos_id], pinned + [False])
