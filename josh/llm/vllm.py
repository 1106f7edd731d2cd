"""The offline vLLM engine (GPU): concurrent ``chat`` calls are collected into one ``engine.generate`` call.

vLLM is an optional extra without a CPU build, imported only when this backend is built. Prompts are rendered with
the engine's tokenizer chat template (``tools=`` passed through); ``n`` samples of one prompt are one request
(``SamplingParams(n=...)``), sharing its prefix in the KV cache, and prefix caching is on so sibling branches of a
conversation reuse their common history. A LoRA adapter (an adapter folder given as the model, ``adapter=``, or a
view made with ``with_adapter``) is attached to every request as a ``LoRARequest``; views share the engine, so one
engine serves several adapters in the same batch.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from josh.llm.base import Backend, Completion, LLMError, Sampling, Usage
from josh.llm.batcher import Batcher
from josh.llm.models import adapter_base, is_adapter_dir, render_chat, resolve_model
from josh.types import Message

INSTALL_HINT = "the vllm backend needs vLLM (GPU only): pip install 'josh[vllm]'"


def import_vllm() -> Any:
    """The ``vllm`` module, or an ImportError that says how to install it."""
    try:
        return importlib.import_module("vllm")
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error


@dataclass
class _Request:
    messages: list[Message]
    tools: list[dict[str, Any]] | None
    params: Any
    lora: Any
    max_prompt_tokens: int | None


class _Engine:
    """One vLLM engine, its batcher and its adapter registry, shared by every view of it."""

    def __init__(self, model: str, *, max_batch_size: int, batch_window_ms: float, **engine_args: Any) -> None:
        self.vllm = import_vllm()
        self.engine = self.vllm.LLM(model=model, **engine_args)
        self.tokenizer = self.engine.get_tokenizer()
        self._adapters: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.batcher: Batcher[_Request, list[Completion]] = Batcher(
            self._run_batch,
            max_batch_size=max_batch_size,
            window_s=batch_window_ms / 1000,
            weight=lambda r: r.params.n,
            name="josh-vllm-generate",
        )

    def lora_request(self, path: str | None) -> Any:
        """The ``LoRARequest`` of an adapter folder (one stable integer id per folder)."""
        if path is None:
            return None
        with self._lock:
            if path not in self._adapters:
                from vllm.lora.request import LoRARequest

                self._adapters[path] = LoRARequest(f"adapter-{len(self._adapters) + 1}", len(self._adapters) + 1, path)
            return self._adapters[path]

    def _run_batch(self, requests: Sequence[_Request]) -> list[list[Completion] | BaseException]:
        prompts = [self._render(r) for r in requests]
        ready = [(r, p) for r, p in zip(requests, prompts, strict=True) if isinstance(p, str)]
        outputs = iter([])
        if ready:
            loras = [r.lora for r, _ in ready]
            outputs = iter(
                self.engine.generate(
                    [p for _, p in ready],
                    sampling_params=[r.params for r, _ in ready],
                    lora_request=loras if any(loras) else None,
                    use_tqdm=False,
                )
            )
        return [p if isinstance(p, BaseException) else _completions(next(outputs)) for p in prompts]

    def _render(self, request: _Request) -> str | LLMError:
        prompt = render_chat(self.tokenizer, request.messages, request.tools)
        if isinstance(prompt, LLMError):
            return prompt
        if request.max_prompt_tokens is not None:
            size = len(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
            if size > request.max_prompt_tokens:
                return LLMError(f"prompt has {size} tokens, more than max_prompt_tokens={request.max_prompt_tokens}")
        return prompt


def _completions(output: Any) -> list[Completion]:
    prompt = len(output.prompt_token_ids or [])
    return [
        Completion(
            text=choice.text,
            prompt_tokens=prompt if k == 0 else 0,
            completion_tokens=len(choice.token_ids),
            finish_reason="length" if choice.finish_reason == "length" else "stop",
        )
        for k, choice in enumerate(output.outputs)
    ]


class VLLMLLM(Backend):
    """A model served by an in-process vLLM engine; see the module docstring."""

    def __init__(
        self,
        model: str | None = None,
        *,
        adapter: str | None = None,
        dtype: str = "auto",
        max_batch_size: int = 256,
        batch_window_ms: float = 10.0,
        max_prompt_tokens: int | None = None,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        max_lora_rank: int = 64,
        enable_lora: bool | None = None,
        _engine: _Engine | None = None,
    ) -> None:
        if _engine is None:
            import_vllm()
            path = resolve_model(model)
            if adapter is None and is_adapter_dir(path):
                adapter, path = path, resolve_model(adapter_base(path))
            engine_args: dict[str, Any] = {
                "dtype": dtype,
                "enable_prefix_caching": True,
                "gpu_memory_utilization": gpu_memory_utilization,
                "tensor_parallel_size": tensor_parallel_size,
                "enable_lora": adapter is not None if enable_lora is None else enable_lora,
            }
            if engine_args["enable_lora"]:
                engine_args["max_lora_rank"] = max_lora_rank
            if max_model_len is not None:
                engine_args["max_model_len"] = max_model_len
            _engine = _Engine(path, max_batch_size=max_batch_size, batch_window_ms=batch_window_ms, **engine_args)
        if adapter is not None and not is_adapter_dir(adapter):
            raise ValueError(f"adapter {adapter!r} is not a PEFT adapter folder (no adapter_config.json)")
        self._engine = _engine
        self.adapter = adapter
        self.max_prompt_tokens = max_prompt_tokens
        self.usage = Usage()

    def with_adapter(self, adapter: str | None) -> VLLMLLM:
        """A view of the same engine that serves ``adapter`` (None: the base model); it keeps its own usage."""
        return VLLMLLM(adapter=adapter, max_prompt_tokens=self.max_prompt_tokens, _engine=self._engine)

    @property
    def batcher(self) -> Batcher:
        return self._engine.batcher

    async def complete(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, n: int, sampling: Sampling
    ) -> list[Completion]:
        request = _Request(
            messages,
            tools,
            self._params(n, sampling),
            self._engine.lora_request(self.adapter),
            self.max_prompt_tokens,
        )
        return await self._engine.batcher.submit(request)

    def close(self, *, cancel: bool = False) -> None:
        """Stop the engine's batching thread (with ``cancel``, queued requests fail instead of running)."""
        self._engine.batcher.close(cancel=cancel)

    def _params(self, n: int, sampling: Sampling) -> Any:
        params: dict[str, Any] = {
            "n": n,
            "temperature": max(sampling.temperature, 0.0),
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
            "seed": sampling.seed,
            "stop": list(sampling.stop) or None,
        }
        if sampling.top_k:
            params["top_k"] = sampling.top_k
        if sampling.grammar:
            structured = importlib.import_module("vllm.sampling_params").StructuredOutputsParams
            params["structured_outputs"] = structured(grammar=sampling.grammar)
        return self._engine.vllm.SamplingParams(**params)
