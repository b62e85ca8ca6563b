"""The OpenAI-compatible server (``agentkit serve``; ``agentkit.serving.app.create_app``): the ``server`` extra."""

from agentkit._extras import require

require("server", "agentkit.serving (the OpenAI-compatible server)")
