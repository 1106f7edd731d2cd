"""The LLM protocol and its records, at their old path for backends outside josh: ``josh.core.llm``."""

from josh.core.llm import (
    LLM,
    OUTCOMES_KEPT,
    Backend,
    Completion,
    ContextLengthError,
    LLMError,
    Sampling,
    Spent,
    Tools,
    Usage,
    aclose_all,
    failures_noted,
    note_failure,
    run_session,
)

__all__ = [
    "Backend",
    "Completion",
    "ContextLengthError",
    "LLM",
    "LLMError",
    "OUTCOMES_KEPT",
    "Sampling",
    "Spent",
    "Tools",
    "Usage",
    "aclose_all",
    "failures_noted",
    "note_failure",
    "run_session",
]
