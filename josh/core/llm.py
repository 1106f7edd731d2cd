"""The one interface every LLM backend implements: async, batched ``chat()``."""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from josh.types import Message, ToolCall

Tools = list[dict[str, Any]] | None  # OpenAI function schemas offered to the model, if any


class Sampling(BaseModel):
    """Decoding parameters. ``seed=None`` means unseeded; sibling samples always differ."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_new_tokens: int = 256
    seed: int | None = None
    stop: list[str] = Field(default_factory=list)
    grammar: str | None = Field(
        None,
        description="a Lark grammar (llguidance dialect, `%json {...}` for JSON-schema parts) every output must match",
    )

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


class Completion(BaseModel):
    """One sampled reply: text and/or native tool calls, with token accounting."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    cost: float = 0.0


OUTCOMES_KEPT = 1000  # the longest window of recent request outcomes a failure policy can look at


class Usage(BaseModel):
    """Running totals a backend keeps over its lifetime, and its latest request outcomes (``streak``: failures in a
    row; ``recent``: True for an answered request) that the failure policy (``josh.llm.health``) reads.

    Outcomes arrive in the order requests end, not the order they were sent: an answer to a request sent before the
    latest failed one (``ticket``) is news about the backend before that failure, so it does not end the streak."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    errors: int = 0
    last_error: str | None = None
    overflows: int = Field(0, description="prompts refused as longer than the model's context (never failures)")
    _streak: int = PrivateAttr(0)
    _recent: deque[bool] = PrivateAttr(default_factory=lambda: deque(maxlen=OUTCOMES_KEPT))
    _sent: int = PrivateAttr(0)
    _failed_ticket: int = PrivateAttr(0)

    @property
    def streak(self) -> int:
        return self._streak

    @property
    def recent(self) -> deque[bool]:
        return self._recent

    def ticket(self) -> int:
        """The number of a request about to be sent (increasing): pass it with the request's outcome."""
        self._sent += 1
        return self._sent

    def failed(self, error: BaseException, ticket: int | None = None) -> None:
        """Count a request that failed after its retries, keeping the latest message for summaries."""
        self.errors += 1
        self.last_error = str(error)[:500]
        self._streak += 1
        self._recent.append(False)
        if ticket is not None:
            self._failed_ticket = max(self._failed_ticket, ticket)

    def add(self, completions: list[Completion], ticket: int | None = None) -> None:
        """Count an answered request; it ends the streak unless it was sent before the latest failed one."""
        self.calls += 1
        if ticket is None or ticket > self._failed_ticket:
            self._streak = 0
        self._recent.append(True)
        for c in completions:
            self.prompt_tokens += c.prompt_tokens
            self.completion_tokens += c.completion_tokens
            self.cost += c.cost


class Spent(BaseModel):
    """LLM calls and tokens spent on a piece of a run (agent and user together): the counters its records carry."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLMError(RuntimeError):
    """A backend failed after its retries; callers record it as an error category and go on."""


class ContextLengthError(LLMError):
    """The prompt is longer than the model's context (or a ``max_prompt_tokens`` limit): the backend is fine and the
    request can never succeed, so the conversation (or search branch) ends here with its own ending, a result; never
    a failure toward a backend being down, never redone on rerun. Every backend raises it, from its own check or
    from the server's answer (``context_length_exceeded``, vLLM's "maximum context length is N tokens")."""

    @staticmethod
    def recognises(answer: str) -> bool:
        """Whether a server's or engine's error text says the prompt is longer than the model's context: OpenAI's
        ``context_length_exceeded`` code, vLLM's messages (its server's "maximum context length is N tokens", its
        engine's "longer than the maximum model length"), llama.cpp's "exceeds the available context size"."""
        return _OVERFLOW.search(answer) is not None


_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length is \d+|longer than the maximum model length"
    r"|exceeds? the available context size",
    re.IGNORECASE,
)


_NOTED: ContextVar[list[str] | None] = ContextVar("josh_llm_failures", default=None)


@contextmanager
def collected(var: ContextVar[list[str] | None]) -> Iterator[list[str]]:
    """A fresh list in ``var`` for the block, in this task and the tasks it starts; the list before it afterwards."""
    noted: list[str] = []
    token = var.set(noted)
    try:
        yield noted
    finally:
        var.reset(token)


def failures_noted() -> AbstractContextManager[list[str]]:
    """The messages of every LLM request that fails inside the block, in this task and the tasks it starts (one
    conversation, one search tree): a piece of work that hit one is a failure, not a result."""
    return collected(_NOTED)


def note_failure(error: BaseException) -> None:
    """Tell the enclosing ``failures_noted`` block, if any, that a request failed after its retries."""
    noted = _NOTED.get()
    if noted is not None:
        noted.append(str(error)[:500])


@runtime_checkable
class LLM(Protocol):
    """Concurrent ``chat`` calls are gathered by the backend into batches (one generate, one engine step, or
    concurrent HTTP requests). ``n`` samples share one prompt."""

    usage: Usage

    async def chat(
        self, messages: list[Message], *, tools: Tools = None, n: int = 1, sampling: Sampling | None = None
    ) -> list[Completion]: ...

    def close(self, *, cancel: bool = False) -> None:
        """Stop the backend's worker threads, if it has any (``cancel``: drop queued requests)."""
        ...

    async def aclose(self) -> None:
        """Close the backend's async HTTP connections, if it has any, inside the event loop that opened them."""
        ...


class Backend(ABC):
    """What every backend shares: ``chat`` checks the request's shape, then counts the completions of ``complete``
    (or its failure) in ``usage``; a backend only says how to complete one checked request."""

    usage: Usage

    async def chat(
        self, messages: list[Message], *, tools: Tools = None, n: int = 1, sampling: Sampling | None = None
    ) -> list[Completion]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if not messages:
            raise ValueError("chat() needs at least one message")
        ticket = self.usage.ticket()
        try:
            completions = await self.complete(list(messages), tools, n, sampling or Sampling())
        except ContextLengthError:  # an answer about this prompt, not a failure of the backend
            self.usage.overflows += 1
            raise
        except LLMError as exc:
            self.usage.failed(exc, ticket)
            note_failure(exc)
            raise
        self.usage.add(completions, ticket)
        return completions

    def close(self, *, cancel: bool = False) -> None:
        """Stop worker threads: nothing to stop for a backend without any (local backends override it)."""
        return None

    async def aclose(self) -> None:
        """Close async connections: nothing to close for a backend without any (HTTP backends override it)."""
        return None

    @abstractmethod
    async def complete(self, messages: list[Message], tools: Tools, n: int, sampling: Sampling) -> list[Completion]:
        """``n`` completions sharing one prompt; ``LLMError`` once the backend's own retries are spent."""


async def aclose_all(llms: Iterable[LLM]) -> None:
    """Close every backend's async connections in the running event loop (before ``asyncio.run`` closes it)."""
    await asyncio.gather(*(llm.aclose() for llm in llms))


T = TypeVar("T")


def run_with_llms(llms: Sequence[LLM], work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(work)``, the backends' async HTTP connections closed in that loop before it ends (their worker
    threads stay: ``close()`` them after)."""

    async def closing() -> T:
        try:
            return await work
        finally:
            await aclose_all(llms)

    return asyncio.run(closing())
