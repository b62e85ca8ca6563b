"""Extraction example: a meeting note in, a validated pydantic object out, with the step's trace.

    python examples/extraction.py [--mode ar|diffusion|verify]
"""

from __future__ import annotations

import argparse

from pydantic import BaseModel, Field

from agentkit import Agent, default_engine


class Meeting(BaseModel):
    person: str = Field(description="who the meeting is with")
    city: str = Field(description="where it takes place")
    day: str = Field(description="weekday of the meeting")
    attendees: int = Field(ge=1, le=50, description="how many people attend")


NOTES = [
    "Lunch with Maria Lopez in Lisbon on Friday, the four of us.",
    "Board review with Kenji Sato in Osaka next Tuesday; twelve people are invited.",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    # no --mode: the calibrated default for extraction (verify on a CPU: ar-constrained's output, fewer forwards)
    ap.add_argument("--mode", default=None, choices=["ar", "diffusion", "verify"])
    args = ap.parse_args()
    agent = Agent(default_engine(), output_type=Meeting, name="extract",
                  instructions="Extract the meeting from the user's note as JSON.")
    for note in NOTES:
        result = agent.run_sync(note, mode=args.mode)
        print(f"{note}\n  -> {result.output!r}")
        print(result.trace.render())


if __name__ == "__main__":
    main()
