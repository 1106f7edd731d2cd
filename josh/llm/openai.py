"""Any OpenAI-compatible chat endpoint (OpenAI, ``vllm serve``, llama.cpp server) through ``openai.AsyncOpenAI``.

Concurrent ``chat`` calls become concurrent HTTP requests, at most ``max_concurrency`` in flight. Rate limits, 5xx
answers, timeouts, dropped connections and broken answers (a body that is not JSON, no ``choices``) are retried
with exponential backoff and full jitter, at least the server's ``Retry-After`` (``max_retries`` times, then
``LLMError``; ``retries`` counts them by kind); other client errors fail at once, and a 400 that says the prompt is
longer than the model's context (OpenAI's ``context_length_exceeded``, vLLM's "maximum context length is N tokens")
raises ``ContextLengthError``, the conversation's own ending. When the model name is a local model folder (as
``josh serve`` names what it serves; ``transformers serve`` does not check the prompt's length), each prompt is
counted first with that folder's tokenizer and refused the same way when it is longer than the model's context
less ``max_tokens``, or than ``max_prompt_tokens`` (see ``josh.llm.prompt_limit``). Once a request has given up on a
server that did not answer (anything but rate limits), the server is taken as gone until an attempt succeeds again:
the requests after it are not retried, one attempt each decides, so that a server that died stops a run after one
round of retries (see ``josh.llm.health``) rather than one round per request. ``n`` goes to the API; a server that rejects ``n > 1``
or returns fewer choices is asked again one sample per request (with distinct seeds when a seed is set). Native
tool calls become ``ToolCall``s (arguments that are not valid JSON stay a raw string). Prompt tokens and their cost
are counted once per HTTP request, on its first completion; the completion tokens of a response are shared out evenly
over its choices (the API only reports totals). OpenAI's reasoning models (o1, o3, o4, gpt-5 families; ``reasoning=``
overrides the guess from the name) take ``max_completion_tokens`` and are sent no temperature or top_p, which they
reject; every other model gets ``max_tokens``, which OpenAI-compatible servers expect.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import ssl
from collections import Counter
from functools import cache
from typing import Any

import httpx
import openai

from josh.core.llm import Backend, Completion, ContextLengthError, LLMError, Sampling, Usage
from josh.llm.prompt_limit import PromptCounter, model_folder
from josh.types import Message, ToolCall

# USD per million (prompt, completion) tokens, by model-name prefix (public list prices when written; override
# with ``prices=``). The longest matching prefix wins; unknown models cost 0 (local servers).
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
}

RETRYABLE_STATUS = {408, 409, 429}
REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def is_reasoning_model(model: str) -> bool:
    """Whether ``model`` names one of OpenAI's reasoning models (judged by its name, after any ``org/``)."""
    return model.rsplit("/", 1)[-1].lower().startswith(REASONING_PREFIXES)


def price_of(model: str, prices: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """(prompt, completion) USD per million tokens for ``model``: the longest matching prefix, else free."""
    matches = [prefix for prefix in prices if model.startswith(prefix)]
    return prices[max(matches, key=len)] if matches else (0.0, 0.0)


class BadResponse(ValueError):
    """The server answered 200 with something that is not a chat completion (broken JSON, no choices)."""


def is_retryable(error: Exception) -> bool:
    if isinstance(error, BadResponse | openai.APIConnectionError | openai.APITimeoutError | openai.RateLimitError):
        return True
    return isinstance(error, openai.APIStatusError) and (
        error.status_code in RETRYABLE_STATUS or error.status_code >= 500
    )


class OpenAILLM(Backend):
    """A chat model behind an OpenAI-compatible HTTP API; see the module docstring."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 16,
        max_retries: int = 5,
        timeout_s: float = 120.0,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        prices: dict[str, tuple[float, float]] | None = None,
        reasoning: bool | None = None,
        max_prompt_tokens: int | None = None,
    ) -> None:
        if not model:
            raise ValueError("the openai backend needs --model: e.g. gpt-4o-mini, or the name the server serves")
        if max_concurrency < 1 or max_retries < 0:
            raise ValueError("max_concurrency must be >= 1 and max_retries >= 0")
        key = api_key or os.environ.get(api_key_env)
        if not key:
            if base_url is None:
                raise ValueError(
                    f"no API key for the openai backend: set ${api_key_env}, or point --base-url at a local server"
                )
            key = "EMPTY"  # local servers accept any key
        folder = model_folder(model, max_prompt_tokens)
        self.model = model
        self.counter = PromptCounter(folder, max_prompt_tokens) if folder is not None else None
        self.base_url = base_url
        self._api_key = key
        self._api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.prices = {**DEFAULT_PRICES, **(prices or {})}
        self.reasoning = is_reasoning_model(model) if reasoning is None else reasoning
        self.usage = Usage()
        self.supports_n = True
        self.requests_sent = 0
        self.retries: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._gone = False  # the latest request gave up on an unanswering server: no retries until one succeeds

    async def complete(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, n: int, sampling: Sampling
    ) -> list[Completion]:
        if self.counter is not None:
            await asyncio.to_thread(self.counter.check, messages, tools, sampling.max_new_tokens)
        completions: list[Completion] = []
        if n > 1 and self.supports_n:
            try:
                completions = await self._request(messages, tools, n, sampling)
            except openai.BadRequestError:
                self.supports_n = False
        missing = n - len(completions)
        if missing > 0:
            singles = await asyncio.gather(
                *(self._request(messages, tools, 1, _reseeded(sampling, len(completions) + i)) for i in range(missing))
            )
            completions.extend(single[0] for single in singles)
        return completions[:n]

    async def _request(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, n: int, sampling: Sampling
    ) -> list[Completion]:
        """One API call with retries; a 400 with ``n > 1`` propagates so the caller can fall back."""
        client, semaphore = self._session()
        kwargs = self._arguments(messages, tools, n, sampling)
        attempt = 0
        while True:
            try:
                completions = await self._attempt(client, semaphore, kwargs)
                self._gone = False
                return completions
            except openai.BadRequestError as error:
                if ContextLengthError.recognises(str(error)):
                    self._gone = False  # the server answered
                    raise ContextLengthError(f"{self.model}: prompt too long for the model: {error}") from error
                if n > 1:
                    raise
                raise LLMError(f"{self.model}: request rejected: {error}") from error
            except (openai.APIError, BadResponse) as error:
                if not is_retryable(error):
                    raise LLMError(f"{self.model}: {type(error).__name__}: {error}") from error
                throttled = isinstance(error, openai.RateLimitError)
                if attempt >= self.max_retries or (self._gone and not throttled):
                    self._gone = not throttled
                    why = "" if attempt >= self.max_retries else " (the request before it gave up: not retried)"
                    raise LLMError(
                        f"{self.model}: gave up after {attempt + 1} attempts{why}: {type(error).__name__}: {error}"
                    ) from error
                self.retries[type(error).__name__] += 1
                await asyncio.sleep(self._backoff(attempt, error))
                attempt += 1

    async def _attempt(
        self, client: openai.AsyncOpenAI, semaphore: asyncio.Semaphore, kwargs: dict[str, Any]
    ) -> list[Completion]:
        async with semaphore:
            self.requests_sent += 1
            try:
                response = await client.chat.completions.create(**kwargs)
            except json.JSONDecodeError as error:  # a body cut short or not JSON at all
                raise BadResponse(f"the response is not valid JSON ({error.msg} at character {error.pos})") from None
        return self._completions(response)

    def _backoff(self, attempt: int, error: Exception) -> float:
        """Full-jitter exponential backoff, at least the server's Retry-After when it sent one."""
        delay = random.uniform(0, min(self.max_backoff_s, self.backoff_s * 2**attempt))
        response = getattr(error, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        try:
            return max(delay, min(float(retry_after), self.max_backoff_s)) if retry_after else delay
        except ValueError:
            return delay

    def _arguments(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, n: int, sampling: Sampling
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": [m.to_openai() for m in messages]}
        if self.reasoning:
            kwargs["max_completion_tokens"] = sampling.max_new_tokens
        else:
            kwargs["max_tokens"] = sampling.max_new_tokens
            kwargs["temperature"] = max(sampling.temperature, 0.0)
            if sampling.top_p < 1.0:
                kwargs["top_p"] = sampling.top_p
        if n > 1:
            kwargs["n"] = n
        if sampling.seed is not None:
            kwargs["seed"] = sampling.seed
        if sampling.stop:
            kwargs["stop"] = sampling.stop
        if tools:
            kwargs["tools"] = tools
        extra: dict[str, Any] = {}
        if sampling.top_k and self.base_url is not None:
            extra["top_k"] = sampling.top_k  # vLLM / llama.cpp extension
        if sampling.grammar:
            if self.base_url is None:
                raise LLMError("OpenAI's API takes no grammar: constrained decoding needs a server such as vllm serve")
            extra["structured_outputs"] = {"grammar": sampling.grammar}  # vLLM's structured outputs
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def _completions(self, response: Any) -> list[Completion]:
        choices = getattr(response, "choices", None)
        if not choices or not isinstance(choices, list):
            raise BadResponse("the server returned no choices")
        if any(getattr(c, "message", None) is None for c in choices):
            raise BadResponse("a choice has no message")
        usage = response.usage
        prompt = usage.prompt_tokens if usage else 0
        total = usage.completion_tokens if usage else 0
        shares = [total // len(response.choices)] * len(response.choices)
        shares[0] += total - sum(shares)
        prompt_price, completion_price = price_of(self.model, self.prices)
        out = []
        for k, (choice, share) in enumerate(zip(response.choices, shares, strict=True)):
            calls = [ToolCall.from_openai(c.model_dump()) for c in (choice.message.tool_calls or [])]
            prompt_here = prompt if k == 0 else 0
            out.append(
                Completion(
                    text=choice.message.content or "",
                    tool_calls=calls,
                    prompt_tokens=prompt_here,
                    completion_tokens=share,
                    finish_reason=choice.finish_reason or "stop",
                    cost=(prompt_here * prompt_price + share * completion_price) / 1e6,
                )
            )
        return out

    def _session(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        """The client and semaphore of the running event loop (both are bound to the loop that first used them)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._client is None or self._semaphore is None:
            self._loop = loop
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self.timeout_s,
                max_retries=0,
                http_client=openai.DefaultAsyncHttpxClient(verify=_tls_context(), timeout=self.timeout_s),
            )
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
        return self._client, self._semaphore

    def check_connection(self, timeout_s: float = 10.0) -> None:
        """Raise ``LLMError`` when the endpoint cannot be reached or refuses the key (one ``GET /models``).

        Any other answer, even an error status from a server without that route, counts as reachable."""
        where = self.base_url or "the OpenAI API"
        client = openai.OpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            timeout=timeout_s,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(verify=_tls_context(), timeout=timeout_s),
        )
        try:
            client.models.list()
        except (openai.APIConnectionError, openai.APITimeoutError) as error:
            cause = error.__cause__ or error
            raise LLMError(
                f"cannot reach {where} ({type(cause).__name__}: {cause}); is the server running at --base-url?"
            ) from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
            raise LLMError(f"{where} refused the API key (${self._api_key_env}): {error.message}") from None
        except openai.APIStatusError:
            pass
        finally:
            client.close()

    async def aclose(self) -> None:
        """Close the HTTP connections of the current client."""
        if self._client is not None:
            await self._client.close()
            self._client = None


def _reseeded(sampling: Sampling, index: int) -> Sampling:
    """Separate single-sample requests need distinct seeds, or a seeded server returns the same sample n times."""
    return sampling if sampling.seed is None else sampling.model_copy(update={"seed": sampling.seed + index})


@cache
def _tls_context() -> ssl.SSLContext:
    """The process's TLS context for OpenAI clients, as httpx would build it (``SSL_CERT_FILE`` / ``SSL_CERT_DIR``
    honoured, else certifi's store): built once, where each client would load the certificate store again (~60 ms)."""
    return httpx.create_ssl_context(trust_env=True)
