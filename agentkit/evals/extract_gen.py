"""A seeded generator of extraction items: texts written from value tables, each with a schema and gold values.

Each item is one line of ``items.jsonl``: ``id``, ``schema`` (a name in ``schemas/``), ``text`` and ``gold`` (the
values the text states, as the schema writes them; an optional field the text does not state is absent from
``gold``). The schemas are JSON Schema files, ``schemas/<name>.json``. Values come from the tables below and the
texts from several phrasings per schema, so a value sits in different places and formats (amounts with currency
signs and thousands separators, dates in four formats, ages in brackets or words around them). Gold values go
only to the files; the extraction prompt sees the schema and the text (:mod:`agentkit.evals.extract`).

``python -m agentkit.evals.extract_gen --out evals/extract --n 320 --seed 0`` writes the committed benchmark.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

FIRST = ["Maria", "John", "Kenji", "Ana", "Fatima", "Lukas", "Priya", "Omar", "Chloe", "Diego", "Ingrid", "Samuel",
         "Aiko", "Noah", "Elena", "Tariq", "Sofia", "Mateo", "Hannah", "Ravi", "Zoe", "Pavel", "Amara", "Felix"]
LAST = ["Lopez", "Smith", "Sato", "Okafor", "Nguyen", "Schmidt", "Patel", "Haddad", "Martin", "Garcia", "Larsen",
        "Cohen", "Tanaka", "Brown", "Rossi", "Khan", "Silva", "Novak", "Meyer", "Kowalski", "Adeyemi", "Dubois"]
CITIES = ["Lisbon", "Boston", "Osaka", "Nairobi", "Hamburg", "Toronto", "Madrid", "Seoul", "Lima", "Oslo",
          "Melbourne", "Chicago", "Cairo", "Prague", "Denver", "Mumbai", "Dublin", "Austin", "Lyon", "Porto"]
COMPANIES = ["Acme Corp", "Blue Harbor Ltd", "Northwind Traders", "Kestrel Labs", "Orchid Systems",
             "Granite Foods", "Silver Pine Media", "Redwood Analytics", "Lumen Health", "Copperline Freight"]
PRODUCTS = ["standing desk", "wireless mouse", "espresso machine", "hiking backpack", "desk lamp", "mechanical keyboard",
            "water filter", "yoga mat", "office chair", "USB hub", "bike helmet", "travel mug"]
TOPICS = ["budget review", "product launch", "hiring plan", "security audit", "quarterly roadmap", "vendor selection",
          "office move", "customer churn"]
DEPARTMENTS = ["engineering", "sales", "marketing", "finance", "support"]
STATUSES = ["pending", "shipped", "delivered", "cancelled"]
PRIORITIES = ["low", "medium", "high"]
SKILLS = ["python", "sql", "excel", "design", "negotiation", "java", "writing", "statistics"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
CURRENCIES = {"USD": ["${n}", "{n} USD", "US${n}", "{n} dollars"], "EUR": ["€{n}", "{n} EUR", "{n} euros"],
              "GBP": ["£{n}", "{n} GBP", "{n} pounds"]}

_DATE = {"type": "string", "format": "date", "description": "ISO date, YYYY-MM-DD"}
SCHEMAS: dict[str, dict[str, Any]] = {
    "person": {"title": "Person", "type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}},
        "required": ["name", "age", "city"]},
    "payment": {"title": "Payment", "type": "object", "properties": {
        "payer": {"type": "string"}, "amount": {"type": "number"},
        "currency": {"type": "string", "enum": sorted(CURRENCIES)}, "date": _DATE},
        "required": ["payer", "amount", "currency", "date"]},
    "order": {"title": "Order", "type": "object", "properties": {
        "product": {"type": "string"}, "quantity": {"type": "integer"}, "unit_price": {"type": "number"},
        "status": {"type": "string", "enum": STATUSES}},
        "required": ["product", "quantity", "unit_price", "status"]},
    "employee": {"title": "Employee", "type": "object", "properties": {
        "name": {"type": "string"}, "department": {"type": "string", "enum": DEPARTMENTS},
        "salary": {"type": "integer"}, "email": {"type": "string"}},
        "required": ["name", "department", "salary"]},
    "event": {"title": "Event", "type": "object", "properties": {
        "title": {"type": "string"}, "date": _DATE, "city": {"type": "string"}, "attendees": {"type": "integer"}},
        "required": ["title", "date", "city", "attendees"]},
    "candidate": {"title": "Candidate", "type": "object", "properties": {
        "name": {"type": "string"}, "years_experience": {"type": "integer"},
        "skills": {"type": "array", "items": {"type": "string"}}, "phone": {"type": "string"}},
        "required": ["name", "years_experience", "skills"]},
    "meeting": {"title": "Meeting", "type": "object", "properties": {
        "topic": {"type": "string"}, "date": _DATE,
        "organizer": {"type": "object", "properties": {"name": {"type": "string"}, "company": {"type": "string"}},
                      "required": ["name", "company"]},
        "attendees": {"type": "array", "items": {"type": "string"}},
        "priority": {"type": "string", "enum": PRIORITIES}},
        "required": ["topic", "date", "organizer", "attendees", "priority"]},
    "shipment": {"title": "Shipment", "type": "object", "properties": {
        "sender": {"type": "string"}, "origin": {"type": "string"}, "destination": {"type": "string"},
        "weight_kg": {"type": "number"}, "tracking_number": {"type": "string"}},
        "required": ["sender", "origin", "destination", "weight_kg"]},
}


def _name(r: random.Random) -> str:
    return f"{r.choice(FIRST)} {r.choice(LAST)}"


def _thousands(n: float, r: random.Random) -> str:
    """``n`` written with or without thousands separators (and two decimals when it has cents)."""
    text = f"{n:,.2f}" if n != int(n) else f"{int(n):,}"
    return text if r.random() < 0.7 else text.replace(",", "")


def _date(r: random.Random) -> tuple[str, str]:
    """(the date as a text writes it, in one of four formats; ISO)."""
    y, m, d = r.randint(2019, 2026), r.randint(1, 12), r.randint(1, 28)
    iso = f"{y:04d}-{m:02d}-{d:02d}"
    forms = [iso, f"{MONTHS[m - 1]} {d}, {y}", f"{d} {MONTHS[m - 1]} {y}", f"{MONTHS[m - 1][:3]} {d} {y}"]
    return r.choice(forms), iso


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def person(r: random.Random) -> tuple[str, dict]:
    g = {"name": _name(r), "age": r.randint(19, 88), "city": r.choice(CITIES)}
    forms = ["{name}, {age}, moved to {city} last year.", "{name} is {age} and lives in {city}.",
             "Our new hire, {name} ({age}), relocates from {city} next month.", "Extract: {name}, {age}, {city}",
             "Born {age} years ago, {name} now calls {city} home.", "Name: {name}. Age: {age}. City: {city}.",
             "At {age}, {name} opened a bakery in {city}."]
    return r.choice(forms).format(**g), g


def payment(r: random.Random) -> tuple[str, dict]:
    cur = r.choice(sorted(CURRENCIES))
    amount = float(r.choice([r.randint(20, 999), r.randint(1000, 250000), r.randint(100, 99999) + r.randint(1, 99) / 100]))
    when, iso = _date(r)
    payer = r.choice(COMPANIES + [_name(r)])
    money = r.choice(CURRENCIES[cur]).format(n=_thousands(amount, r))
    g = {"payer": payer, "amount": int(amount) if amount == int(amount) else amount, "currency": cur, "date": iso}
    forms = ["{payer} paid {money} on {when}.", "On {when} we received {money} from {payer}.",
             "Payment received: {money} ({payer}, {when}).", "Invoice settled by {payer} for {money}, dated {when}."]
    return r.choice(forms).format(payer=payer, money=money, when=when), g


def order(r: random.Random) -> tuple[str, dict]:
    q, price = r.randint(1, 60), round(r.randint(5, 2500) + r.choice([0, 0.5, 0.99, 0.25]), 2)
    g = {"product": r.choice(PRODUCTS), "quantity": q, "unit_price": int(price) if price == int(price) else price,
         "status": r.choice(STATUSES)}
    p = f"${_thousands(price, r)}"
    forms = ["Order of {q} x {product} at {p} each is {status}.", "The {q} units of {product} ({p} apiece) were {status}.",
             "Status {status}: {product}, quantity {q}, unit price {p}.",
             "We ordered {q} units of {product} for {p} each; the order is now {status}."]
    return r.choice(forms).format(q=q, product=g["product"], p=p, status=g["status"]), g


def employee(r: random.Random) -> tuple[str, dict]:
    name = _name(r)
    g: dict[str, Any] = {"name": name, "department": r.choice(DEPARTMENTS), "salary": r.randint(32, 240) * 1000}
    sal = r.choice(["${s}", "{s} dollars a year", "an annual salary of ${s}"]).format(s=_thousands(g["salary"], r))
    text = r.choice(["{name} joins {dept} on {sal}.", "{name} ({dept}) earns {sal}.",
                     "New contract: {name}, {dept} team, {sal}."]).format(name=name, dept=g["department"], sal=sal)
    if r.random() < 0.5:
        g["email"] = name.lower().replace(" ", ".") + "@" + r.choice(["example.com", "mail.org", "corp.net"])
        text += r.choice([" Reach them at {e}.", " Email: {e}", " Contact: {e}."]).format(e=g["email"])
    return text, g


def event(r: random.Random) -> tuple[str, dict]:
    when, iso = _date(r)
    g = {"title": r.choice(["Spring Gala", "Data Summit", "Jazz Night", "Startup Fair", "Book Fest", "Code Camp"]),
         "date": iso, "city": r.choice(CITIES), "attendees": r.choice([r.randint(12, 400), r.randint(1000, 60000)])}
    n = _thousands(g["attendees"], r)
    forms = ["The {title} in {city} on {when} drew {n} attendees.", "{n} people came to {title} ({city}, {when}).",
             "Event: {title}. Where: {city}. When: {when}. Attendance: {n}."]
    return r.choice(forms).format(title=g["title"], city=g["city"], when=when, n=n), g


def candidate(r: random.Random) -> tuple[str, dict]:
    g: dict[str, Any] = {"name": _name(r), "years_experience": r.randint(1, 30),
                         "skills": r.sample(SKILLS, r.randint(1, 3))}
    text = r.choice(["{name} has {y} years of experience with {s}.",
                     "Candidate {name}: {y} years in the field; skills: {s}.",
                     "With {y} years behind them, {name} brings {s}."]).format(
        name=g["name"], y=g["years_experience"], s=_join(g["skills"]))
    if r.random() < 0.5:
        g["phone"] = f"555-{r.randint(100, 999)}-{r.randint(1000, 9999)}"
        text += f" Phone: {g['phone']}."
    return text, g


def meeting(r: random.Random) -> tuple[str, dict]:
    when, iso = _date(r)
    people = r.sample(FIRST, r.randint(2, 3))
    g = {"topic": r.choice(TOPICS), "date": iso, "organizer": {"name": _name(r), "company": r.choice(COMPANIES)},
         "attendees": people, "priority": r.choice(PRIORITIES)}
    forms = ["{org} of {co} set up a {pri}-priority {topic} meeting on {when} with {ppl}.",
             "Meeting on {when} about the {topic}, organised by {org} ({co}). Attending: {ppl}. Priority: {pri}.",
             "{ppl} will join the {topic} on {when}; {org} from {co} runs it, priority {pri}."]
    return r.choice(forms).format(org=g["organizer"]["name"], co=g["organizer"]["company"], pri=g["priority"],
                                  topic=g["topic"], when=when, ppl=_join(people)), g


def shipment(r: random.Random) -> tuple[str, dict]:
    a, b = r.sample(CITIES, 2)
    w = r.choice([r.randint(1, 90), round(r.randint(1, 900) / 10, 1), r.randint(1000, 20000)])
    g: dict[str, Any] = {"sender": r.choice(COMPANIES), "origin": a, "destination": b, "weight_kg": w}
    text = r.choice(["{s} shipped {w} kg from {a} to {b}.", "A {w} kg parcel from {s} left {a} for {b}.",
                     "Shipment: {a} -> {b}, sender {s}, weight {w} kg."]).format(
        s=g["sender"], w=_thousands(w, r) if w >= 1000 else w, a=a, b=b)
    if r.random() < 0.5:
        g["tracking_number"] = f"TRK{r.randint(10000000, 99999999)}"
        text += f" Tracking number {g['tracking_number']}."
    return text, g


WRITERS: dict[str, Callable[[random.Random], tuple[str, dict]]] = {
    "person": person, "payment": payment, "order": order, "employee": employee, "event": event,
    "candidate": candidate, "meeting": meeting, "shipment": shipment}


def generate(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` items, the schemas in turn, from ``random.Random(seed)``."""
    r = random.Random(seed)
    names = list(WRITERS)
    items = []
    for i in range(n):
        schema = names[i % len(names)]
        text, gold = WRITERS[schema](r)
        items.append({"id": f"{schema}-{i:04d}", "schema": schema, "text": text, "gold": gold})
    return items


def write(out: Path, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``out/items.jsonl`` (``n`` items) and ``out/schemas/<name>.json`` for the schemas they use."""
    items = generate(n, seed)
    (out / "schemas").mkdir(parents=True, exist_ok=True)
    for name in sorted({it["schema"] for it in items}):
        (out / "schemas" / f"{name}.json").write_text(json.dumps(SCHEMAS[name], indent=2) + "\n")
    with open(out / "items.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(it, ensure_ascii=False) + "\n" for it in items)
    return items


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=320)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    items = write(a.out, a.n, a.seed)
    print(f"{len(items)} items -> {a.out}")


if __name__ == "__main__":
    main()
