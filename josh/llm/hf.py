"""The transformers backend (CPU or GPU): concurrent ``chat`` calls become one left-padded batched ``generate``.

Each request is rendered with the tokenizer's chat template (``tools=`` passed through) and expanded into ``n``
rows; rows of all requests gathered within ``batch_window_ms`` (up to ``max_batch_size`` rows) run in one
``generate`` on a worker thread, each row decoded with its own parameters (see ``josh.llm.hf_sampling``). Tokens
the rows share at the start (system prompt, tools, the prompt of ``n`` samples, an earlier turn) are computed once
and reused across batches (see ``josh.llm.hf_prefix``). On CPU, weights are stored input-major, which makes small
batched matrix products several times faster. Replies are raw text; the agents parse tool calls from it. Prompt
tokens are counted once per request, on its first completion, so ``Usage`` sums what was computed for distinct
prompts.

Models load through ``resolve_model``: a hub id, a local folder, the offline ``smollm2`` default, or a PEFT adapter
folder (its base is loaded, then the adapter is attached; it is folded into full-precision weights for speed, since
every LoRA layer otherwise costs two extra small matrix products per step, and kept separate on 4-bit bases, which
merging would degrade; ``merge_adapter=False`` keeps it separate everywhere).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DynamicCache,
    GenerationConfig,
    LogitsProcessorList,
    StaticCache,
    StoppingCriteria,
    StoppingCriteriaList,
)

from josh.core.llm import Backend, Completion, LLMError, Sampling, Usage
from josh.llm.batcher import Batcher
from josh.llm.config import HFConfig
from josh.llm.hf_grammar import GrammarMask, grammar_problem, grammar_tokenizer
from josh.llm.hf_prefix import PrefixCache
from josh.llm.hf_sampling import RowSampler, RowSpec, RowStopper, row_seed
from josh.llm.merge import has_tokenizer
from josh.llm.models import adapter_base, chatml_template, four_bit, is_adapter_dir, render_chat, resolve_model
from josh.llm.prompt_limit import context_length, too_long
from josh.types import Message


@dataclass
class _Request:
    messages: list[Message]
    tools: list[dict[str, Any]] | None
    n: int
    first_index: int
    sampling: Sampling


def load_model(config: HFConfig) -> tuple[Any, Any]:
    """Load (model, tokenizer) for inference with an adapter (given, or ``model`` itself) attached; see the module
    docstring for when it is merged."""
    adapter, load_in_4bit = config.adapter, config.load_in_4bit
    path = resolve_model(config.model)
    if adapter is None and is_adapter_dir(path):
        adapter, path = path, resolve_model(adapter_base(path))
    if adapter is not None and not is_adapter_dir(adapter):
        raise ValueError(f"adapter {adapter!r} is not a PEFT adapter folder (no adapter_config.json)")
    device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
    kwargs: dict[str, Any] = {"dtype": _torch_dtype(config.dtype, device)}
    if load_in_4bit:
        kwargs["quantization_config"] = four_bit(kwargs["dtype"])
        kwargs["device_map"] = {"": torch.device(device).index or 0} if device.startswith("cuda") else {"": device}
    net = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if not load_in_4bit:
        net = net.to(device)
    tokenizer_source = adapter if adapter and has_tokenizer(adapter) else path
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    if adapter is not None:
        from peft import PeftModel  # optional: the train extra

        net = PeftModel.from_pretrained(net, adapter, is_trainable=False)
        if config.merge_adapter and not load_in_4bit:
            net = net.merge_and_unload()
    if not tokenizer.chat_template:
        tokenizer.chat_template = chatml_template()
    net.eval()
    if device == "cpu" and not load_in_4bit:  # 4-bit weights are packed; their layout is bitsandbytes'
        input_major_weights(net)
    return net, tokenizer


def input_major_weights(net: Any) -> None:
    """Store every linear and embedding weight input-major (the same values, viewed as the usual out x in).

    ``linear(x, W)`` multiplies by ``W.T``; when ``W.T`` is itself contiguous, MKL's small-batch GEMM on CPU is several
    times faster (batched decoding spends most of its time there), and prefill is unchanged. Tied weights stay tied.
    """
    moved: dict[int, nn.Parameter] = {}
    for module in net.modules():
        weight = getattr(module, "weight", None)
        if not isinstance(module, nn.Linear | nn.Embedding) or not isinstance(weight, torch.Tensor):
            continue
        if id(weight) not in moved:
            moved[id(weight)] = nn.Parameter(weight.detach().t().contiguous().t(), requires_grad=False)
        module.weight = moved[id(weight)]


def _torch_dtype(name: str, device: str):
    if name == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, name)  # one of HFConfig's dtypes


class HFLLM(Backend):
    """A transformers model served with batched generation; see the module docstring."""

    def __init__(self, model: str | None = None, *, net: Any = None, tokenizer: Any = None, **settings: Any) -> None:
        """Load ``model`` (or serve an already loaded ``net`` and ``tokenizer``); ``settings`` are the fields of
        ``josh.llm.factory.HFConfig`` (adapter, dtype, device, load_in_4bit, max_batch_size, ...)."""
        config = HFConfig(model=model, **settings)
        if (net is None) != (tokenizer is None):
            raise ValueError("pass both net= and tokenizer= (an already loaded model) or neither")
        if net is None:
            net, tokenizer = load_model(config)
        self.net = net
        self.tokenizer = tokenizer
        self.usage = Usage()
        self.max_batch_size = config.max_batch_size
        self.context_length = context_length(getattr(net, "config", None)) or 4096
        self.max_prompt_tokens = config.max_prompt_tokens
        self.stop_ids = _stop_token_ids(net, tokenizer)
        self.prefix_cache = PrefixCache(net, max_tokens=config.prefix_cache_tokens)
        self._ll_tokenizer: Any = None
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_ids[0]
        self.batcher: Batcher[_Request, list[Completion]] = Batcher(
            self._run_batch,
            max_batch_size=config.max_batch_size,
            window_s=config.batch_window_ms / 1000,
            weight=lambda r: r.n,
            name="josh-hf-generate",
        )

    async def complete(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, n: int, sampling: Sampling
    ) -> list[Completion]:
        chunks = [
            _Request(messages, tools, min(self.max_batch_size, n - start), start, sampling)
            for start in range(0, n, self.max_batch_size)
        ]
        parts = await asyncio.gather(*(self.batcher.submit(chunk) for chunk in chunks))
        completions = [c for part in parts for c in part]
        for extra in completions[1:]:
            extra.prompt_tokens = 0
        return completions

    def close(self, *, cancel: bool = False) -> None:
        """Stop the generation thread (with ``cancel``, a generation in progress stops at its next token)."""
        self.batcher.close(cancel=cancel)

    def _run_batch(self, requests: Sequence[_Request]) -> list[list[Completion] | BaseException]:
        prompts: list[list[int] | BaseException] = [self._encode(r) for r in requests]
        rows: list[tuple[int, list[int], RowSpec]] = []
        for i, (request, ids) in enumerate(zip(requests, prompts, strict=True)):
            if isinstance(ids, BaseException):
                continue
            s = request.sampling
            for k in range(request.n):
                seed = row_seed(s.seed, request.first_index + k)
                spec = RowSpec(s.temperature, s.top_p, s.top_k, seed, s.max_new_tokens, s.stop, s.grammar)
                rows.append((i, ids, spec))
        outputs = self._generate([ids for _, ids, _ in rows], [spec for _, _, spec in rows]) if rows else []
        results: list[list[Completion] | BaseException] = [
            ids if isinstance(ids, BaseException) else [] for ids in prompts
        ]
        for (i, ids, _), completion in zip(rows, outputs, strict=True):
            completion.prompt_tokens = len(ids)
            results[i].append(completion)  # type: ignore[union-attr]
        return results

    def _encode(self, request: _Request) -> list[int] | BaseException:
        text = render_chat(self.tokenizer, request.messages, request.tools)
        if isinstance(text, LLMError):
            return text
        if request.sampling.grammar:
            problem = grammar_problem(request.sampling.grammar)
            if problem:
                return LLMError(f"the request's grammar does not compile: {problem}")
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        overflow = too_long(len(ids), self.context_length, request.sampling.max_new_tokens, self.max_prompt_tokens)
        return ids if overflow is None else overflow

    def _generate(self, prompts: list[list[int]], specs: list[RowSpec]) -> list[Completion]:
        shared = self.prefix_cache.shared(prompts)
        start = len(shared) if shared is not None else 0
        width = start + max(len(p) - start for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        if shared is not None:  # rows: [shared prefix | padding | own suffix]
            input_ids[:, :start] = torch.tensor(shared.tokens, dtype=torch.long)
            attention[:, :start] = 1
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) + start :] = torch.tensor(ids[start:])
            attention[row, width - len(ids) + start :] = 1
        max_new_tokens = max(s.max_new_tokens for s in specs)
        cache = self._new_cache(len(prompts), width + max_new_tokens)
        if shared is not None:
            shared.fill(cache, len(prompts))
        config = GenerationConfig(
            do_sample=False,
            max_new_tokens=max_new_tokens,
            pad_token_id=self.pad_id,
            eos_token_id=self.stop_ids,
            disable_compile=True,
        )
        with torch.inference_mode():
            output = self.net.generate(
                input_ids=input_ids.to(self.net.device),
                attention_mask=attention.to(self.net.device),
                past_key_values=cache,
                generation_config=config,
                logits_processor=LogitsProcessorList([*self._grammar_masks(specs, width), RowSampler(specs)]),
                stopping_criteria=StoppingCriteriaList(
                    [RowStopper(specs, width, self.tokenizer), _when_set(self.batcher.cancelled)]
                ),
            )
        return [self._decode(tokens, spec) for tokens, spec in zip(output[:, width:].tolist(), specs, strict=True)]

    def _grammar_masks(self, specs: list[RowSpec], width: int) -> list[Any]:
        """The grammar processor for a batch with constrained rows (none otherwise)."""
        grammars = [s.grammar for s in specs]
        if not any(grammars):
            return []

        if self._ll_tokenizer is None:
            vocab = self.net.get_output_embeddings().weight.shape[0]
            self._ll_tokenizer = grammar_tokenizer(self.tokenizer, vocab, self.stop_ids)
        return [GrammarMask(grammars, self._ll_tokenizer, width)]

    def _new_cache(self, rows: int, length: int) -> Any:
        """An empty key/value cache: preallocated on CPU (saves re-concatenating every layer each step), growing on
        GPU (a static cache there would trigger transformers' automatic compilation)."""
        if self.net.device.type == "cpu":
            return StaticCache(config=self.net.config, max_cache_len=length)
        return DynamicCache(config=self.net.config)

    def _decode(self, tokens: list[int], spec: RowSpec) -> Completion:
        ended = next((k for k, t in enumerate(tokens) if t in self.stop_ids or t == self.pad_id), None)
        kept = tokens if ended is None else tokens[:ended]
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        cuts = [text.find(s) for s in spec.stop if s and s in text]
        if cuts:
            return Completion(text=text[: min(cuts)], completion_tokens=len(kept), finish_reason="stop")
        if ended is None and len(kept) >= spec.max_new_tokens:
            return Completion(text=text, completion_tokens=len(kept), finish_reason="length")
        return Completion(text=text, completion_tokens=len(kept), finish_reason="stop")


def _when_set(event: Any) -> Any:
    """A stopping criterion that ends every row once ``event`` is set (``close(cancel=True)``)."""

    class _Cancelled(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return torch.full((input_ids.shape[0],), event.is_set(), dtype=torch.bool, device=input_ids.device)

    return _Cancelled()


def _stop_token_ids(net: Any, tokenizer: Any) -> list[int]:
    """Token ids that end a reply: the generation config's EOS ids and the tokenizer's EOS."""
    ids: list[int] = []
    configured = getattr(getattr(net, "generation_config", None), "eos_token_id", None)
    for value in [configured, tokenizer.eos_token_id]:
        for token in value if isinstance(value, list) else [value]:
            if token is not None and token not in ids:
                ids.append(int(token))
    if not ids:
        raise ValueError("the tokenizer has no EOS token and the model's generation config names none")
    return ids
