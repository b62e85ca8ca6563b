"""Experiment: no pinned runs; the model picks every token (its own tokenization of the fixed text), as a grammar sampler does."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from agentkit.constrain import runtime

if os.environ.get("PIN") == "free":
    runtime.TokenConstraint._forced_first = lambda self, s: None
import peers

peers.main(sys.argv[1:])
