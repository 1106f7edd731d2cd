"""The one failure policy of every runner: an LLM request that failed after the backend's own retries is a failure,
never a result, and a backend that is down stops the run.

Per piece of work (a conversation, a search tree, a judgement), ``josh.core.llm.failures_noted`` collects the
failed requests; a runner records such a piece as failed (its ``failed`` field), leaves it out of every metric and
of training data, and does it again on rerun. Per backend, ``Usage`` keeps the latest request outcomes, and
``failing_backend`` says the backend is down when ``max_consecutive`` requests failed in a row (``NEVER_ANSWERED``
when it has not answered once yet), when more than ``max_share`` of its last ``window`` requests failed, or when it
says it can serve no more (``dead``: an in-process engine whose processes died). Runners call ``stop_if_failing``
before each result is written: it raises ``BackendDownError`` (one line naming the backend and its last error), the
command exits non-zero, and what finished so far stays on disk. A run that ends with failed pieces checks once more
(``ended=True``): a backend whose latest request failed is down; one that answered again leaves a run that exits
non-zero too, saying how many pieces failed (``IncompleteRunError``, ``require_complete``), so that nothing takes it
for complete. Before a run, ``check_connections`` asks every HTTP backend once whether it answers.

A prompt longer than the model's context (``ContextLengthError``) is none of this: the backend answered that the
request can never succeed, so it is counted apart (``Usage.overflows``), never toward a backend being down, never
noted as a failed request; the piece of work ends with its own ending (``josh.run.step``) and is finished, not redone.

The thresholds come from the environment, so every runner (eval, rollout, matrix, judge, arena, the extraction
gate, GRPO rollouts, Ray actors) reads the same ones: ``JOSH_MAX_CONSECUTIVE_FAILURES`` (default 5),
``JOSH_FAILURE_WINDOW`` (20) and ``JOSH_MAX_FAILURE_SHARE`` (0.5).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import lru_cache
from itertools import islice

from pydantic import BaseModel, Field, ValidationError

from josh.core.llm import LLM, OUTCOMES_KEPT, LLMError

NEVER_ANSWERED = 3  # failed requests that stop a run whose backend has not answered once yet
ENV_VARS = {
    "max_consecutive": "JOSH_MAX_CONSECUTIVE_FAILURES",
    "window": "JOSH_FAILURE_WINDOW",
    "max_share": "JOSH_MAX_FAILURE_SHARE",
}


class BackendDownError(LLMError):
    """A backend is down (see the module docstring): the run stops rather than score an agent that never spoke."""


class IncompleteRunError(LLMError):
    """A run ended with pieces not finished (their LLM failed): what reads its results must not take them as whole."""


class FailurePolicy(BaseModel):
    """When a backend counts as down: failures in a row, or the failed share of its latest requests."""

    max_consecutive: int = Field(5, ge=1, description="failed requests in a row that stop the run")
    window: int = Field(20, ge=1, le=OUTCOMES_KEPT, description="latest requests the failed share is taken over")
    max_share: float = Field(0.5, gt=0.0, le=1.0, description="a failed share above this (window full) stops the run")

    @classmethod
    def from_env(cls) -> FailurePolicy:
        """The policy the ``JOSH_*`` variables set (``ValueError`` naming the variable for a bad value)."""
        return _policy(tuple(os.environ.get(var, "").strip() for var in ENV_VARS.values()))


@lru_cache(maxsize=8)
def _policy(settings: tuple[str, ...]) -> FailurePolicy:
    """The policy of these ``ENV_VARS`` values (built once: the guard asks before every result)."""
    values = {key: value for key, value in zip(ENV_VARS, settings, strict=True) if value}
    try:
        return FailurePolicy(**values)
    except ValidationError as exc:
        key = str(exc.errors(include_url=False)[0]["loc"][0])
        raise ValueError(f"{ENV_VARS[key]}={values[key]!r}: {exc.errors(include_url=False)[0]['msg']}") from None


def require_complete(what: str, pending: int, failed: int, rerun: str = "rerun the same command") -> None:
    """Raise ``IncompleteRunError`` when a run left pieces ``pending`` (``failed`` of them on LLM errors), for
    whatever reads its results next (the loop's next stage, the matrix's comparison)."""
    if pending:
        raise IncompleteRunError(
            f"{what}: {pending} not finished ({failed} failed on LLM errors); {rerun} to redo them"
        )


def check_connections(llms: Iterable[LLM]) -> None:
    """Raise ``LLMError`` for the first backend that says it cannot be reached (backends without a check pass)."""
    for llm in llms:
        check = getattr(llm, "check_connection", None)
        if callable(check):
            check()


def backend_name(llm: LLM) -> str:
    """The backend as a user names it: its ``name`` if it has one, else its kind, model and, for a server, its
    address."""
    name = getattr(llm, "name", None)
    if isinstance(name, str) and name:
        return name
    kind = type(llm).__name__.removesuffix("LLM").lower() or type(llm).__name__
    model = getattr(llm, "model", None)
    url = getattr(llm, "base_url", None)
    return f"{kind}:{model}" + (f" at {url}" if url else "") if model else kind


def failing_backend(llms: Iterable[LLM], policy: FailurePolicy | None = None, *, ended: bool = False) -> str | None:
    """Why the run should stop (see the module docstring), naming the backend and its last error; else None.
    ``ended``: the run is over with failed pieces, and a backend whose latest request failed counts as down."""
    policy = policy or FailurePolicy.from_env()
    for llm in llms:
        usage = llm.usage
        dead = getattr(llm, "dead", None)
        if dead:
            return f"{dead}; stopping the run ({usage.errors} requests failed). Rerun to resume."
        recent = getattr(usage, "recent", None)
        if recent is None:  # a backend outside josh with a plain usage record: no outcomes to judge by
            continue
        streak = usage.streak
        if usage.calls == 0 and streak >= NEVER_ANSWERED:
            why = f"all {streak} requests failed, none answered"
        elif streak >= policy.max_consecutive or (ended and streak):
            why = f"{streak} requests in a row failed" + (", the last ones of the run" if ended else "")
        else:
            if len(recent) < policy.window:
                continue
            failed = sum(not ok for ok in islice(reversed(recent), policy.window))
            if failed / policy.window <= policy.max_share:
                continue
            why = f"{failed} of its last {policy.window} requests failed"
        return (
            f"the LLM backend {backend_name(llm)} is down: {why}; stopping the run (rerun to retry what failed). "
            f"Last error: {usage.last_error}"
        )
    return None


def stop_if_failing(llms: Iterable[LLM], policy: FailurePolicy | None = None, *, ended: bool = False) -> None:
    """Raise ``BackendDownError`` when ``failing_backend`` names a problem."""
    problem = failing_backend(list(llms), policy, ended=ended)
    if problem is not None:
        raise BackendDownError(problem)
