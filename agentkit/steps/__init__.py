"""One agent step, shared by the SDK's ``Agent`` and the server: what each step kind asks of the model
(:mod:`agentkit.steps.kinds`: templates, prompts, output checks) and the runner of a tool-choice step
(:mod:`agentkit.steps.runner`: decide, template, generate, check grounding and repeats)."""
