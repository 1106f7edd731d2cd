"""The environment contract, at its old path for environments outside josh: ``josh.core.env``."""

from josh.core.env import (
    ENV_MEMBERS,
    OPTIONAL_MEMBERS,
    REQUIRED_MEMBERS,
    ConversationState,
    Env,
    EnvBase,
    JudgeCall,
    missing_members,
)

__all__ = [
    "ConversationState",
    "ENV_MEMBERS",
    "Env",
    "EnvBase",
    "JudgeCall",
    "OPTIONAL_MEMBERS",
    "REQUIRED_MEMBERS",
    "missing_members",
]
