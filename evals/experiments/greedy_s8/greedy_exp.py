import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from agentkit import config

g = os.environ["GREEDY"]
orig = config.DecodeConfig.__init__
def init(self, *a, **kw):
    kw.setdefault("greedy", g)
    orig(self, *a, **kw)
config.DecodeConfig.__init__ = init
import peers

peers.main(sys.argv[1:])
