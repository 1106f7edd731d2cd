"""josh: self-training tool-calling dialogue agents from sparse rewards.

Importing josh loads nothing else: the Python API (``josh.api``: ``make_env``, ``make_llm``, ``make_agent``,
``make_user``, ``search_task``, ``extract``, ``train``, ``evaluate``, ``check_env``) is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from josh.version import __version__

__all__ = [
    "__version__",
    "check_env",
    "evaluate",
    "extract",
    "make_agent",
    "make_env",
    "make_llm",
    "make_user",
    "search_task",
    "train",
]
API = frozenset(__all__) - {"__version__"}

if TYPE_CHECKING:
    from josh.api import check_env, evaluate, extract, make_agent, make_env, make_llm, make_user, search_task, train


def __getattr__(name: str) -> Any:
    if name in API:
        from josh import api  # heavy: every layer; import josh stays light

        return getattr(api, name)
    raise AttributeError(f"module 'josh' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API])
