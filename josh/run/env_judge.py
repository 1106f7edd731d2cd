"""The LLM judge an environment option names (``--env-option judge=BACKEND:MODEL``: τ²'s NL-assertion judge), with
its settings (``--env-option 'judge_options={base_url: http://HOST:8000/v1}'``, the keys of ``--judge-option``): its
key among the run's LLMs, checked with them before anything loads, and handed to the built environment as a
blocking call.

A judge with its own settings is built with them. A judge without settings that names the run's own ``--backend``
and ``--model`` shares that LLM with its ``--base-url`` and ``--llm-option`` settings (so ``--backend openai
--base-url ... --env-option judge=openai:MODEL`` judges on a local server, and a scripted judge takes the run's
canned replies); any other judge is built with its backend's defaults.

An environment computes its reward synchronously, inside the conversation's event loop, where the judge cannot be
awaited: ``blocking_chat`` runs each request to its end on a worker thread with an event loop of its own (the
conversation waits for it; backends bind their connections to the loop they run in). The judge answers greedily.
A judge prompt longer than the judge model's context fails the request as any failed request does for the
environment, and is noted for the conversation it scores (``judge_overflows``), which ends as
``judge_context_length``: a result, not a failure of the judge's backend.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

from josh.core.llm import LLM, ContextLengthError, LLMError, Sampling, collected
from josh.llm.config import LLMKey
from josh.registry import parse_backend_model
from josh.types import Message

JUDGE_OPTION = "judge"
JUDGE_SETTINGS_OPTION = "judge_options"
MAX_JUDGE_TOKENS = 1024
_OVERFLOWED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("josh_judge_overflows", default=None)


def judge_overflows() -> AbstractContextManager[list[str]]:
    """The lines of the environment judge's requests inside the block whose prompt outgrew the judge's context."""
    return collected(_OVERFLOWED)


def env_judge(
    env_options: Mapping[str, Any], own: LLMKey, settings: Mapping[str, Any]
) -> tuple[LLMKey, dict[str, Any]] | None:
    """(backend, model, base URL) of the judge ``env_options`` names, and its backend settings (``own``, ``settings``:
    the run's own backend, model and endpoint, and its settings); None without a judge."""
    name = env_options.get(JUDGE_OPTION)
    if not name:
        return None
    backend, model = parse_backend_model(str(name), f"--env-option {JUDGE_OPTION}")
    own_settings = dict(env_options.get(JUDGE_SETTINGS_OPTION) or {})
    if own_settings:
        return (backend, model, own_settings.pop("base_url", None)), own_settings
    if (backend, model) == own[:2]:
        return own, dict(settings)
    return (backend, model, None), {}


def blocking_chat(llm: LLM) -> Callable[[list[Message]], str]:
    """A synchronous greedy call of ``llm`` (see the module docstring); a failed request raises ``RuntimeError``."""
    sampling = Sampling(temperature=0.0, max_new_tokens=MAX_JUDGE_TOKENS)

    def ask(messages: list[Message]) -> str:
        async def one() -> str:
            [completion] = await llm.chat(messages, sampling=sampling)
            return completion.text

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="env-judge") as pool:
            try:
                # in this context: a failed request is noted for the conversation it scores (josh.llm.health)
                return pool.submit(contextvars.copy_context().run, asyncio.run, one()).result()
            except ContextLengthError as exc:
                noted = _OVERFLOWED.get()
                if noted is not None:
                    noted.append(str(exc))
                raise RuntimeError(f"judge prompt too long: {exc}") from exc
            except LLMError as exc:
                raise RuntimeError(f"judge request failed: {exc}") from exc

    return ask


def attach_judge(env: Any, llm: LLM) -> None:
    """Give ``env`` (an environment built with a ``judge`` option) its judge."""
    env.judge_call = blocking_chat(llm)
