"""The user-simulator protocol and its records, at their old path for simulators outside josh: ``josh.core.user``."""

from josh.core.user import (
    ToolUser,
    UserSimulator,
    UserTurn,
)

__all__ = ["ToolUser", "UserSimulator", "UserTurn"]
