"""One agent step, shared by the SDK's ``Agent`` and the server:

- :mod:`agentkit.steps.kinds`: what each step kind asks of the model (templates, prompts, output checks);
- :mod:`agentkit.steps.decision`: the tool step's decision by the model's scores (sans-IO: it yields score requests);
- :mod:`agentkit.steps.tool_step`: one tool step from start to finish (decide, generate, check grounding and repeats,
  the text reply), sans-IO: it yields score and generate requests, its options say where the SDK and the server
  differ;
- :mod:`agentkit.steps.drive`: answering a step's requests, synchronously or awaited;
- :mod:`agentkit.steps.runner`: the tool step on an engine (the server's chat service runs every request through it).
"""
