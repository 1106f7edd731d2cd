"""τ²'s NL assertions judged by the LLM a user names (``--env-option judge=BACKEND:MODEL``), through josh's backends.

τ²'s ``NLAssertionsEvaluator`` writes its own prompt (the conversation and the task's expected outcomes) and reads
the answer itself (a JSON object of results, each met or not); it asks its LLM through ``generate`` of
``tau2.utils.llm_utils`` (litellm, OpenAI's gpt-4o-mini by default). josh keeps τ²'s prompt, reading and reward and
replaces only that one call: while a judged evaluation runs, the evaluator module's ``generate`` hands τ²'s messages
to a ``JudgeCall`` (josh messages in, the answer's text out; ``josh.run.env_judge`` makes one from any josh backend)
and returns its text as τ²'s assistant message. Nothing reaches litellm's network.

NL assertions count only where a task's reward basis names ``NL_ASSERTION``: only there is the evaluation τ²'s
``ALL_WITH_NL_ASSERTIONS``; elsewhere the judge is not asked, since its answer would multiply nothing, and the reward
is ``ALL``'s. No task of the pinned release counts them (airline's 50 tasks and 8 of retail's list assertions outside
their reward basis), so there a judge changes no reward and makes no call.

A judge that fails (its request, or an answer τ² cannot read, where τ² itself would raise) fails the assertions:
reward 0.0, the reason in the reward's ``info`` and a warning in the run's log.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tau2.data_model.message import AssistantMessage
from tau2.data_model.simulation import RewardInfo
from tau2.data_model.tasks import RewardType

from josh.types import Message

JudgeCall = Callable[[list[Message]], str]
"""The judge's greedy answer to a chat; raises ``RuntimeError`` when the request failed."""

log = logging.getLogger(__name__)
_PATCH = threading.Lock()


def counts_nl_assertions(tau2_task: Any) -> bool:
    """Whether the task's reward basis counts NL assertions."""
    criteria = tau2_task.evaluation_criteria
    return criteria is not None and RewardType.NL_ASSERTION in criteria.reward_basis


@contextmanager
def judged_by(judge: JudgeCall) -> Iterator[None]:
    """τ²'s NL-assertion evaluator asks ``judge`` instead of litellm while the block runs (one block at a time)."""
    from tau2.evaluator import evaluator_nl_assertions as module  # optional: the tau2 extra

    def generate(model: str, messages: list[Any], *args: Any, **kwargs: Any) -> AssistantMessage:
        chat = [Message(role=m.role, content=m.content) for m in messages]  # τ²'s system and user prompts
        return AssistantMessage(role="assistant", content=judge(chat))

    with _PATCH:
        original = module.generate
        module.generate = generate
        try:
            yield
        finally:
            module.generate = original


def evaluate_judged(run: Any, tau2_task: Any, domain: str, judge: JudgeCall) -> RewardInfo:
    """``evaluate_simulation(run, task, ALL_WITH_NL_ASSERTIONS)`` with ``judge`` as τ²'s LLM; a failed judge is a
    0.0 reward (see the module docstring)."""
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # optional: the tau2 extra

    try:
        with judged_by(judge):
            return evaluate_simulation(run, tau2_task, EvaluationType.ALL_WITH_NL_ASSERTIONS, False, domain)
    except (RuntimeError, ValueError, LookupError, AttributeError, TypeError) as exc:
        note = f"the NL-assertion judge failed on task {tau2_task.id}: {type(exc).__name__}: {exc}"
        log.warning(note)
        return RewardInfo(reward=0.0, reward_basis=tau2_task.evaluation_criteria.reward_basis, info={"note": note})
