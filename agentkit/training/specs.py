"""Procedurally generated function specs: many functions with varied names, parameter types and shapes.

The hand-written ``FUNCTIONS`` of :mod:`.data` are 14 functions with scalar parameters; a model adapted on them alone
learns those 14 layouts. Here a function is drawn from vocabularies: a name (``verb_noun``, sometimes with a
``namespace.`` prefix), 1-4 parameters from a bank of typed parameters (integers, numbers, strings from pools,
booleans, enums, arrays of numbers or strings), some optional, and a request sentence that states every argument it
uses. Answers follow the same canonical compact JSON as the hand-written calls. Nothing here comes from a benchmark.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

VERBS = ["get", "calculate", "find", "compute", "search", "estimate", "list", "check", "convert", "predict",
         "lookup", "analyze", "fetch", "generate", "count", "measure", "plan", "schedule", "validate", "summarize"]
NOUNS = ["area", "volume", "distance", "interest", "population", "forecast", "price", "score", "average", "route",
         "schedule", "inventory", "balance", "density", "velocity", "probability", "recipe", "itinerary", "salary",
         "emissions", "calories", "ranking", "tax", "discount", "mortgage", "energy", "frequency", "budget", "loan"]
NAMESPACES = ["math", "finance", "geo", "stats", "physics", "travel", "health", "sports", "chem", "data"]
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Stark Industries", "Wayne Corp", "Hooli", "Vandelay"]
COUNTRIES = ["France", "Japan", "Brazil", "Canada", "Kenya", "India", "Norway", "Mexico", "Egypt", "Chile"]
COLORS = ["red", "blue", "green", "black", "white", "yellow", "purple"]
ITEMS = ["apples", "laptops", "bicycles", "tickets", "books", "chairs", "batteries", "shoes"]
TEAMS = ["Lakers", "Warriors", "Arsenal", "Yankees", "Celtics", "Barcelona", "Dodgers", "Chelsea"]
ELEMENTS = ["hydrogen", "carbon", "oxygen", "iron", "gold", "neon", "sodium", "copper"]
PEOPLE = ["Ada Lovelace", "Alan Turing", "Marie Curie", "Isaac Newton", "Grace Hopper", "Nikola Tesla"]
CITIES = ["Paris", "Boston", "Tokyo", "Berlin", "Madrid", "Cairo", "Lima", "Oslo", "Denver", "Seoul", "Sydney"]
STR_POOLS = {"city": CITIES, "company": COMPANIES, "country": COUNTRIES, "color": COLORS, "item": ITEMS,
             "team": TEAMS, "element": ELEMENTS, "person": PEOPLE}

# (parameter name, kind, phrase used in the request); kinds: int, num, rate, year, bool, enum:<a|b|c>,
# str:<pool>, ints, nums, strs:<pool>
PARAMS = [
    ("radius", "int", "a radius of"), ("length", "num", "a length of"), ("width", "num", "a width of"),
    ("height", "int", "a height of"), ("base", "int", "a base of"), ("side", "int", "a side of"),
    ("principal", "int", "a principal of"), ("rate", "rate", "a rate of"), ("years", "int", "a period in years of"),
    ("amount", "num", "an amount of"), ("quantity", "int", "a quantity of"), ("year", "year", "the year"),
    ("temperature", "num", "a temperature of"), ("mass", "num", "a mass of"), ("speed", "num", "a speed of"),
    ("city", "str:city", "the city"), ("company", "str:company", "the company"),
    ("country", "str:country", "the country"), ("color", "str:color", "the color"), ("item", "str:item", "the item"),
    ("team", "str:team", "the team"), ("element", "str:element", "the element"), ("person", "str:person", "the person"),
    ("include_tax", "bool", "including tax"), ("detailed", "bool", "a detailed answer"),
    ("round_result", "bool", "rounding"),
    ("unit", "enum:metric|imperial", "units"), ("method", "enum:fast|accurate|balanced", "the method"),
    ("period", "enum:daily|weekly|monthly", "a period of"), ("sort_order", "enum:asc|desc", "sort order"),
    ("numbers", "ints", "the numbers"), ("values", "nums", "the values"), ("scores", "ints", "the scores"),
    ("weights", "nums", "the weights"), ("cities", "strs:city", "the cities"), ("teams", "strs:team", "the teams"),
    ("items", "strs:item", "the items"), ("countries", "strs:country", "the countries"),
]


STREETS = ["Maple Street", "Oak Avenue", "Rua Augusta", "King Road", "Elm Court", "Baker Street", "Via Roma"]
FIRST = ["Ana", "Bruno", "Chen", "Dara", "Emil", "Fatima", "Goran", "Hana", "Ivo", "Julia", "Kenji", "Leila"]
LAST = ["Costa", "Silva", "Wang", "Okafor", "Novak", "Haddad", "Petrov", "Sato", "Moreau", "Berg", "Rossi"]
WORDS = ["solar", "river", "quantum", "garden", "budget", "winter", "market", "signal", "harbor", "orbit", "pixel"]
TEXT_POOLS = {  # free strings the call must copy from the request (not one of a few pool values)
    "person": lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}",
    "email": lambda r: f"{r.choice(FIRST).lower()}.{r.choice(LAST).lower()}@{r.choice(WORDS)}.com",
    "address": lambda r: f"{r.randint(1, 999)} {r.choice(STREETS)}",
    "title": lambda r: " ".join(w.capitalize() for w in r.sample(WORDS, r.randint(2, 4))),
    "query": lambda r: " ".join(r.sample(WORDS, r.randint(2, 3))),
    "code": lambda r: f"{r.choice('ABCDEFGHKMNPRSTXZ')}{r.choice('ABCDEFGHKMNPRSTXZ')}-{r.randint(100, 9999)}",
    "phone": lambda r: f"+{r.randint(1, 99)} {r.randint(100, 999)} {r.randint(100, 999)} {r.randint(100, 9999)}",
}
OBJECTS = {  # nested object parameters: (field, kind), the first field required
    "location": (("city", "str:city"), ("country", "str:country"), ("zip_code", "text:code")),
    "filters": (("min_price", "int"), ("color", "str:color"), ("in_stock", "bool")),
    "contact": (("name", "text:person"), ("email", "text:email"), ("phone", "text:phone")),
    "window": (("start_year", "year"), ("end_year", "year"), ("period", "enum:daily|weekly|monthly")),
}
VARIED_PARAMS = PARAMS + [
    ("customer", "text:person", "the customer"), ("email", "text:email", "the email"),
    ("address", "text:address", "the address"), ("title", "text:title", "the title"),
    ("query", "text:query", "the search query"), ("reference", "text:code", "the reference"),
    ("phone", "text:phone", "the phone number"), ("owner", "text:person", "the owner"),
    ("format", "enum:json|csv|xml|pdf", "the format"), ("priority", "enum:low|medium|high|urgent", "priority"),
    ("region", "enum:north|south|east|west|central", "the region"),
    ("location", "obj:location", "a location"), ("filters", "obj:filters", "filters"),
    ("contact", "obj:contact", "a contact"), ("window", "obj:window", "a time window"),
    ("tags", "strs:color", "the tags"), ("limit", "int", "a limit of"), ("ratio", "rate", "a ratio of"),
]


@dataclass(frozen=True)
class GenParam:
    name: str
    kind: str
    phrase: str
    required: bool

    def schema(self) -> dict:
        k = self.kind
        words = [w for w in self.phrase.split() if w not in ("a", "an", "the", "of")]
        desc = " ".join(words).capitalize()
        if k in ("int", "year"):
            return {"type": "integer", "description": desc}
        if k in ("num", "rate"):
            return {"type": "number", "description": desc}
        if k == "bool":
            return {"type": "boolean", "description": f"Whether to use {self.phrase}"}
        if k.startswith("enum:"):
            return {"type": "string", "enum": k[5:].split("|"), "description": desc}
        if k in ("ints", "nums"):
            return {"type": "array", "items": {"type": "integer" if k == "ints" else "number"}, "description": desc}
        if k.startswith("strs:"):
            return {"type": "array", "items": {"type": "string"}, "description": desc}
        if k.startswith("obj:"):
            subs = [GenParam(n, sk, n.replace("_", " "), i == 0) for i, (n, sk) in enumerate(OBJECTS[k[4:]])]
            return {"type": "object", "properties": {p.name: p.schema() for p in subs},
                    "required": [p.name for p in subs if p.required], "description": desc}
        return {"type": "string", "description": desc}

    def value(self, r: random.Random):
        k = self.kind
        if k == "int":
            return r.choice([r.randint(1, 20), r.randint(1, 1000)])
        if k == "year":
            return r.randint(1950, 2030)
        if k == "num":
            return round(r.uniform(0.5, 500), r.choice([1, 2]))
        if k == "rate":
            return round(r.uniform(0.01, 0.15), 2)
        if k == "bool":
            return r.random() < 0.5
        if k.startswith("enum:"):
            return r.choice(k[5:].split("|"))
        if k == "ints":
            return [r.randint(0, 100) for _ in range(r.randint(1, 6))]
        if k == "nums":
            return [round(r.uniform(0, 100), 1) for _ in range(r.randint(1, 5))]
        if k.startswith("strs:"):
            return r.sample(STR_POOLS[k[5:]], r.randint(1, 3))
        if k.startswith("obj:"):  # the first field always, the others (optional) half the time
            fields = OBJECTS[k[4:]]
            return {n: GenParam(n, sk, n, True).value(r) for i, (n, sk) in enumerate(fields)
                    if i == 0 or r.random() < 0.5}
        if k.startswith("text:"):
            return TEXT_POOLS[k[5:]](r)
        return r.choice(STR_POOLS[k[4:]])

    def say(self, v, r: random.Random) -> str:
        """How a request states the argument."""
        if self.kind == "bool":
            return ("with " if v else "without ") + self.phrase
        if isinstance(v, dict):
            inner = ", ".join(f"{n.replace('_', ' ')} {x}" for n, x in v.items())
            return f"{self.phrase} with {inner}"
        if self.kind.startswith("text:"):
            return f"{self.phrase} \"{v}\"" if r.random() < 0.5 else f"{self.phrase} {v}"
        if isinstance(v, list):
            items = [str(x) for x in v]
            listed = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
            return f"{self.phrase} {r.choice([listed, '[' + ', '.join(items) + ']'])}"
        return f"{self.phrase} {v}"


@dataclass(frozen=True)
class GenFn:
    name: str
    description: str
    params: tuple[GenParam, ...]
    verb: str
    noun: str

    def schema(self) -> dict:
        return {"type": "object", "properties": {p.name: p.schema() for p in self.params},
                "required": [p.name for p in self.params if p.required]}


def random_function(r: random.Random, bank: list | None = None, max_params: int = 4) -> GenFn:
    """A function drawn from the vocabularies; ``bank`` (default :data:`PARAMS`) is the parameter bank
    (:data:`VARIED_PARAMS` adds free strings copied from the request and nested objects)."""
    verb, noun = r.choice(VERBS), r.choice(NOUNS)
    name = f"{verb}_{noun}"
    if r.random() < 0.35:
        name = f"{r.choice(NAMESPACES)}.{name}"
    picked = r.sample(bank or PARAMS, r.randint(1, max_params))
    params = tuple(GenParam(n, k, ph, required=i == 0 or r.random() < 0.6) for i, (n, k, ph) in enumerate(picked))
    return GenFn(name, f"{verb.capitalize()} the {noun} from the given inputs.", params, verb, noun)


def request(fn: GenFn, values: dict, r: random.Random) -> str:
    """A user request that states every argument in ``values`` (in random order)."""
    verb, noun = fn.verb, fn.noun
    parts = [p.say(values[p.name], r) for p in fn.params if p.name in values]
    r.shuffle(parts)
    args = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return r.choice([f"Please {verb} the {noun} for {args}.", f"Can you {verb} the {noun} given {args}?",
                     f"I need the {noun} with {args}.", f"{verb.capitalize()} the {noun} using {args}."])
