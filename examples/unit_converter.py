"""A small tool-using agent: unit conversions. The tool call decodes under the tool's schema and the final reply is
free text, each in its calibrated mode (verify on a CPU: greedy AR's output in fewer forwards;
``RoutingPolicy(tool_call="diffusion")`` sends the call to the block-diffusion canvas). It runs on the default engine, whose weights have the loop adapter merged in (a LoRA
taught on the agent loop's own traces: adapters/smollm2-135m-loop/MODEL_CARD.md); with it the 135M model gets 5 of 8
conversions right in bf16 with AR tool steps (all 8 finished), 5 with diffusion ones (6 finished); in float32 4 and 7
(``python evals/unit_conversions.py [--lora none]``, evals/results/examples/unit_converter_default.json).

    python examples/unit_converter.py "How many km is 26.2 miles?"
    agentkit run examples/unit_converter.py:agent "Convert 100 F to C" --trace trace.jsonl

One tool with the units as the question writes them ("miles", "F", "kg") suits a small model better than one tool
per quantity with enum units: it copies the words it reads instead of choosing among look-alike codes.
"""

from __future__ import annotations

import sys

from agentkit import Agent, Limits, ModelRetry, default_engine, tool

# unit -> (quantity, factor to the quantity's base unit); temperatures are converted apart
_UNITS = {
    "m": ("length", 1.0), "km": ("length", 1000.0), "cm": ("length", 0.01), "mm": ("length", 0.001),
    "mile": ("length", 1609.344), "yard": ("length", 0.9144), "foot": ("length", 0.3048),
    "inch": ("length", 0.0254), "kg": ("mass", 1.0), "g": ("mass", 0.001), "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125), "C": ("temperature", 0.0), "F": ("temperature", 0.0),
    "K": ("temperature", 0.0),
}
_ALIASES = {
    "meter": "m", "metre": "m", "kilometer": "km", "kilometre": "km", "centimeter": "cm", "centimetre": "cm",
    "millimeter": "mm", "millimetre": "mm", "mi": "mile", "yd": "yard", "feet": "foot", "ft": "foot",
    "in": "inch", "inches": "inch", "kilogram": "kg", "kilo": "kg", "gram": "g", "pound": "lb", "lbs": "lb",
    "ounce": "oz", "celsius": "C", "centigrade": "C", "fahrenheit": "F", "kelvin": "K",
}


def unit(name: str) -> str:
    """The canonical unit for a name as people write it ("miles", "Fahrenheit", "kgs")."""
    key = name.strip().rstrip(".").replace("°", "")
    for cand in (key, key.lower(), key.upper(), key.lower().rstrip("s"), key.lower().removesuffix("es")):
        if cand in _UNITS:
            return cand
        if cand in _ALIASES:
            return _ALIASES[cand]
    raise ModelRetry(f"unknown unit {name!r}; use one of {', '.join(_UNITS)}")


@tool
def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a length, mass or temperature from one unit to another.

    Args:
        value: the number to convert, as the question writes it
        from_unit: the unit of that number, as the question writes it (e.g. miles, kg, F)
        to_unit: the unit the question asks for (e.g. km, lb, C)
    """
    src, dst = unit(from_unit), unit(to_unit)
    kind = _UNITS[src][0]
    if _UNITS[dst][0] != kind:
        raise ModelRetry(f"cannot convert {kind} ({src}) to {_UNITS[dst][0]} ({dst})")
    if kind == "temperature":
        c = {"C": value, "F": (value - 32) * 5 / 9, "K": value - 273.15}[src]
        return round({"C": c, "F": c * 9 / 5 + 32, "K": c + 273.15}[dst], 2)
    return round(value * _UNITS[src][1] / _UNITS[dst][1], 2)


def build_agent(model=None) -> Agent:
    return Agent(
        model if model is not None else default_engine(),
        tools=[convert],
        instructions="You convert units. Call the convert tool with the number and the units from the question, "
                     "then answer in one short sentence.",
        limits=Limits(max_iterations=4),
        name="unit-converter",
    )


class _LazyAgent:
    """``agentkit run examples/unit_converter.py:agent`` builds the agent (and loads the model) only when used."""

    def __call__(self) -> Agent:
        return build_agent()


agent = _LazyAgent()


if __name__ == "__main__":
    task = sys.argv[1] if len(sys.argv) > 1 else "How many km is 26.2 miles?"
    result = build_agent().run_sync(task)
    print(result.output)
    print(result.trace.render())
