"""A deterministic backend for tests and benchmarks: replies come from a policy function or a list of canned replies.

``ScriptedLLM(policy)`` calls ``policy(messages, tools, sample_index)`` once per sample; the policy returns the reply
text or a full ``Completion`` (for native tool calls or a custom finish reason), directly or as an awaitable. A list
of replies is cycled in order across all calls. An optional per-request latency is awaited with ``asyncio.sleep``, so
concurrent requests overlap like requests to a real server; ``max_concurrency`` caps how many are in flight.
Every request is logged in ``requests`` for assertions.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from josh.core.llm import Backend, Completion, Sampling, Usage
from josh.types import Message

PolicyResult = str | Completion
Policy = Callable[[list[Message], list[dict[str, Any]] | None, int], PolicyResult | Awaitable[PolicyResult]]


class ScriptedRequest(BaseModel):
    """One logged ``chat`` call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    messages: list[Message]
    tools: list[dict[str, Any]] | None
    n: int
    sampling: Sampling


def count_tokens(text: str | None) -> int:
    """Approximate token count: whitespace-separated words."""
    return len(text.split()) if text else 0


def prompt_tokens(messages: Sequence[Message]) -> int:
    """Approximate prompt size: words of every message's content and tool-call arguments."""
    total = 0
    for message in messages:
        total += count_tokens(message.content)
        for call in message.tool_calls or ():
            total += count_tokens(str(call.arguments)) + 1
    return total


class ScriptedLLM(Backend):
    """Replies from a policy or a cycled list; see the module docstring."""

    def __init__(
        self,
        policy: Policy | Sequence[PolicyResult],
        *,
        latency_s: float = 0.0,
        max_concurrency: int | None = None,
    ) -> None:
        if latency_s < 0:
            raise ValueError(f"latency_s must be >= 0, got {latency_s}")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1 or None, got {max_concurrency}")
        if callable(policy):
            self._policy: Policy = policy
        else:
            replies = list(policy)
            if not replies:
                raise ValueError("ScriptedLLM needs a policy callable or at least one canned reply")
            cycle = itertools.cycle(replies)
            self._policy = lambda _messages, _tools, _index: next(cycle)
        self.latency_s = latency_s
        self.max_concurrency = max_concurrency
        self.usage = Usage()
        self.requests: list[ScriptedRequest] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self._semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}

    async def complete(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, n: int, sampling: Sampling
    ) -> list[Completion]:
        self.requests.append(ScriptedRequest(messages=messages, tools=tools, n=n, sampling=sampling))
        semaphore = self._semaphore()
        if semaphore is None:
            return await self._serve(messages, tools, n, sampling)
        async with semaphore:
            return await self._serve(messages, tools, n, sampling)

    def _semaphore(self) -> asyncio.Semaphore | None:
        if self.max_concurrency is None:
            return None
        loop = asyncio.get_running_loop()
        if loop not in self._semaphores:
            self._semaphores = {loop: asyncio.Semaphore(self.max_concurrency)}
        return self._semaphores[loop]

    async def _serve(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, n: int, sampling: Sampling
    ) -> list[Completion]:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            completions = [await self._sample(messages, tools, i, sampling) for i in range(n)]
        finally:
            self.in_flight -= 1
        completions[0].prompt_tokens = prompt_tokens(messages)
        return completions

    async def _sample(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, index: int, sampling: Sampling
    ) -> Completion:
        result = self._policy(messages, tools, index)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, Completion):
            completion = result.model_copy(deep=True)
        elif isinstance(result, str):
            completion = Completion(text=result)
        else:
            raise TypeError(f"scripted policy must return str or Completion, got {type(result).__name__}")
        completion.prompt_tokens = 0
        if not completion.completion_tokens:
            completion.completion_tokens = count_tokens(completion.text)
        return _apply_limits(completion, sampling)


def _apply_limits(completion: Completion, sampling: Sampling) -> Completion:
    """Honour stop strings and ``max_new_tokens`` (in whitespace tokens) the way a real backend would."""
    text = completion.text
    cuts = [text.find(s) for s in sampling.stop if s and s in text]
    if cuts:
        completion.text = text[: min(cuts)]
        completion.finish_reason = "stop"
        completion.completion_tokens = count_tokens(completion.text)
    words = completion.text.split()
    if len(words) > sampling.max_new_tokens:
        completion.text = " ".join(words[: sampling.max_new_tokens])
        completion.finish_reason = "length"
        completion.completion_tokens = sampling.max_new_tokens
    return completion
