"""The contract the components meet, below all of them: the protocols (``Env`` and ``ConversationState``,
``Agent``, ``UserSimulator``, ``LLM``), the records they exchange (turns, completions, sampling, usage) and the
readers of tool calls out of model text that agents and user simulators share.

``josh.envs``, ``josh.agents``, ``josh.users`` and ``josh.llm`` import this layer and never each other (the
layer contract in ``pyproject.toml``), so an environment's own scripted agent (``josh.envs.toolwoz.oracle``) is an
``Agent`` without importing ``josh.agents``.
"""
