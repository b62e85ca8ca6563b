"""A small tool-using agent: unit conversions. Tool calls decode under each tool's schema (diffusion by default);
the final reply is free text (AR).

    python examples/unit_converter.py "How many kilometres is 26.2 miles?"
    agentkit run examples/unit_converter.py:agent "Convert 100 Fahrenheit to Celsius" --trace trace.jsonl
"""

from __future__ import annotations

import sys
from typing import Literal

from agentkit import Agent, Limits, ModelRetry, default_engine, tool

_LENGTH = {"m": 1.0, "km": 1000.0, "cm": 0.01, "mm": 0.001, "mile": 1609.344, "yard": 0.9144, "foot": 0.3048,
           "inch": 0.0254}
_MASS = {"kg": 1.0, "g": 0.001, "lb": 0.45359237, "oz": 0.028349523125}


@tool
def convert_length(value: float, from_unit: Literal["m", "km", "cm", "mm", "mile", "yard", "foot", "inch"],
                   to_unit: Literal["m", "km", "cm", "mm", "mile", "yard", "foot", "inch"]) -> float:
    """Convert a length between units.

    Args:
        value: the length to convert
        from_unit: unit of ``value``
        to_unit: unit to convert to
    """
    return round(value * _LENGTH[from_unit] / _LENGTH[to_unit], 4)


@tool
def convert_mass(value: float, from_unit: Literal["kg", "g", "lb", "oz"], to_unit: Literal["kg", "g", "lb", "oz"]) -> float:
    """Convert a mass between units.

    Args:
        value: the mass to convert
        from_unit: unit of ``value``
        to_unit: unit to convert to
    """
    return round(value * _MASS[from_unit] / _MASS[to_unit], 4)


@tool
def convert_temperature(value: float, from_unit: Literal["C", "F", "K"], to_unit: Literal["C", "F", "K"]) -> float:
    """Convert a temperature between Celsius (C), Fahrenheit (F) and Kelvin (K).

    Args:
        value: the temperature to convert
        from_unit: scale of ``value``
        to_unit: scale to convert to
    """
    if from_unit == "K" and value < 0:
        raise ModelRetry("a Kelvin temperature cannot be negative")
    c = {"C": value, "F": (value - 32) * 5 / 9, "K": value - 273.15}[from_unit]
    return round({"C": c, "F": c * 9 / 5 + 32, "K": c + 273.15}[to_unit], 2)


def build_agent(model=None) -> Agent:
    return Agent(
        model if model is not None else default_engine(),
        tools=[convert_length, convert_mass, convert_temperature],
        instructions="You convert units. Call one conversion tool with the numbers from the question, "
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
    task = sys.argv[1] if len(sys.argv) > 1 else "How many kilometres is 26.2 miles?"
    result = build_agent().run_sync(task)
    print(result.output)
    print(result.trace.render())
