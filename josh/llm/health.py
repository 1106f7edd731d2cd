"""Stop a run whose LLM backend never answers, instead of recording a zero-reward "success".

Two checks: before a run, every HTTP backend is asked once whether it can be reached (``check_connections``);
while it runs, a backend that has failed its first ``MIN_FAILURES`` requests without answering a single one, or
that says it can serve no more (``dead``: an in-process engine whose processes died), stops the run
(``failing_backend``, called before each result is written, so no result of a dead backend lands on disk once
it is known; the run resumes from the results before it).
"""

from __future__ import annotations

from collections.abc import Iterable

from josh.llm.base import LLM, LLMError

MIN_FAILURES = 3


class BackendDownError(LLMError):
    """Every request to a backend has failed: the run stops rather than score an agent that never spoke."""


def check_connections(llms: Iterable[LLM]) -> None:
    """Raise ``LLMError`` for the first backend that says it cannot be reached (backends without a check pass)."""
    for llm in llms:
        check = getattr(llm, "check_connection", None)
        if callable(check):
            check()


def failing_backend(llms: Iterable[LLM], min_failures: int = MIN_FAILURES) -> str | None:
    """Why the run should stop, when a backend has failed ``min_failures`` requests and answered none; else None."""
    for llm in llms:
        dead = getattr(llm, "dead", None)
        if dead:
            return f"{dead}; stopping the run ({llm.usage.errors} requests failed). Rerun to resume."
        usage = llm.usage
        if usage.calls == 0 and usage.errors >= min_failures:
            name = getattr(llm, "model", None) or type(llm).__name__
            return (
                f"all {usage.errors} requests to the LLM backend ({name}) failed, none answered; "
                f"stopping the run. Last error: {usage.last_error}"
            )
    return None


def stop_if_failing(llms: Iterable[LLM]) -> None:
    """Raise ``BackendDownError`` when ``failing_backend`` names a problem."""
    problem = failing_backend(list(llms))
    if problem is not None:
        raise BackendDownError(problem)
