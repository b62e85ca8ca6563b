import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentkit import config

g = os.environ["GREEDY"]
orig = config.DecodeConfig.__init__
def init(self, *a, **kw):
    kw.setdefault("greedy", g)
    orig(self, *a, **kw)
config.DecodeConfig.__init__ = init
if os.environ.get("ORDER") == "req":
    from order_lib import reorder

    from agentkit.evals import bfcl
    o = bfcl.BfclItem.call_params
    bfcl.BfclItem.call_params = lambda self, name: reorder(o(self, name))
import peers

peers.main(sys.argv[1:])
