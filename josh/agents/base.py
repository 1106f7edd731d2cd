"""The agent protocol and its records, at their old path for agents outside josh: ``josh.core.agent``."""

from josh.core.agent import (
    Agent,
    AgentTurn,
    PromptFrame,
)

__all__ = ["Agent", "AgentTurn", "PromptFrame"]
