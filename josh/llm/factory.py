"""Build LLM backends from a name and options, or from a validated ``LLMConfig`` (recipes, the CLI).

    make_llm(backend: str, model: str | None = None, *, policy=None, **options) -> LLM
    build_llm(config: LLMConfig, *, policy=None) -> LLM

``backend`` is one of ``hf``, ``vllm``, ``openai``, ``scripted``; ``options`` are ``LLMConfig`` fields
(unknown names are rejected). ``policy`` is the scripted backend's callable (or canned replies). Backend modules
are imported only when built, so building a scripted or openai backend never imports torch or vllm.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from josh.llm.base import LLM

Backend = Literal["hf", "vllm", "openai", "scripted"]


class LLMConfig(BaseModel):
    """Everything needed to build one backend; fields a backend does not use are ignored by it."""

    model_config = ConfigDict(extra="forbid")

    backend: Backend = "hf"
    model: str | None = Field(None, description="hub id, local folder, adapter folder or 'smollm2' (hf/vllm default)")
    adapter: str | None = Field(None, description="PEFT LoRA adapter folder applied on top of the model (hf, vllm)")
    # hf and vllm
    max_batch_size: int = Field(32, ge=1, description="most sequences in one generate / engine call")
    batch_window_ms: float = Field(10.0, ge=0, description="how long to gather concurrent requests into a batch")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: str | None = Field(None, description="torch device for hf; default cuda when available, else cpu")
    load_in_4bit: bool = Field(False, description="hf: bitsandbytes NF4 weights (CUDA only)")
    merge_adapter: bool = Field(True, description="hf: fold a LoRA adapter into a full-precision base (never 4-bit)")
    prefix_cache_tokens: int = Field(
        8192, ge=0, description="hf: prompt-prefix tokens whose key/value states are kept for reuse (0: off)"
    )
    max_prompt_tokens: int | None = Field(None, ge=1, description="longer prompts fail with LLMError")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="vllm")
    max_model_len: int | None = Field(None, ge=1, description="vllm")
    tensor_parallel_size: int = Field(1, ge=1, description="vllm")
    max_lora_rank: int = Field(64, ge=1, description="vllm")
    # openai
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key")
    max_concurrency: int | None = Field(None, ge=1, description="requests in flight at once (openai, scripted)")
    max_retries: int = Field(5, ge=0, description="openai: retries on 429/5xx/timeouts/connection errors")
    timeout_s: float = Field(120.0, gt=0, description="openai: per-request timeout")
    backoff_s: float = Field(0.5, ge=0, description="openai: first retry's backoff (doubled on each retry, jittered)")
    max_backoff_s: float = Field(30.0, ge=0, description="openai: longest wait between retries, Retry-After included")
    prices: dict[str, tuple[float, float]] | None = Field(
        None, description="openai: USD per million (prompt, completion) tokens by model-name prefix"
    )
    reasoning: bool | None = Field(
        None, description="openai: an OpenAI reasoning model (max_completion_tokens, no temperature); default: by name"
    )
    # scripted
    replies: list[str] | None = Field(None, description="scripted: canned replies, cycled")
    latency_s: float = Field(0.0, ge=0, description="scripted: simulated seconds per request")

    @model_validator(mode="after")
    def _check_backend_needs(self) -> LLMConfig:
        if self.backend == "openai" and not self.model:
            raise ValueError("the openai backend needs --model: e.g. gpt-4o-mini, or the name the server serves")
        return self


BACKENDS: tuple[str, ...] = ("hf", "vllm", "openai", "scripted")
SETTINGS_FLAG = "--llm-option (setup.llm_options in a loop recipe)"


def llm_config(backend: str, model: str | None = None, **options: Any) -> LLMConfig:
    """A validated ``LLMConfig``; a bad backend name or setting raises one ``ValueError`` line naming it."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    try:
        return LLMConfig(backend=backend, model=model, **options)
    except ValidationError as exc:
        raise ValueError(_explain(exc, options)) from None


PACKAGES = {"hf": ("torch", "transformers"), "vllm": ("vllm",)}


SCRIPTED_NEEDS_REPLIES = (
    'the scripted backend needs canned replies: --llm-option \'replies=["...", "..."]\' '
    "(setup.llm_options.replies in a loop recipe; policy= in Python)"
)


def check_buildable(config: LLMConfig) -> None:
    """What ``build_llm`` would fail on, checked without loading anything: a missing package (``ImportError``
    naming the install command) or a scripted backend without replies (``ValueError``)."""
    import importlib.util

    for name in PACKAGES.get(config.backend, ()):
        if importlib.util.find_spec(name) is None:
            hint = "pip install 'josh[vllm]' (GPU only)" if name == "vllm" else "pip install 'josh[train]'"
            raise ImportError(f"the {config.backend} backend needs {name}, which is not installed: {hint}")
    if config.backend == "scripted" and not config.replies:
        raise ValueError(SCRIPTED_NEEDS_REPLIES)


def _explain(exc: ValidationError, options: dict[str, Any]) -> str:
    problems = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"])
        if error["type"] == "extra_forbidden":
            valid = ", ".join(k for k in LLMConfig.model_fields if k not in ("backend", "model"))
            problems.append(f"unknown backend setting {key!r} in {SETTINGS_FLAG}; valid settings: {valid}")
        elif key in options:
            problems.append(f"bad backend setting {key}={options[key]!r} in {SETTINGS_FLAG}: {error['msg']}")
        else:
            problems.append(error["msg"].removeprefix("Value error, "))
    return "; ".join(problems)


def make_llm(backend: str, model: str | None = None, *, policy: Any = None, **options: Any) -> LLM:
    """Build a backend by name; see the module docstring."""
    return build_llm(llm_config(backend, model, **options), policy=policy)


def build_llm(config: LLMConfig, *, policy: Any = None) -> LLM:
    """Build the backend a config describes."""
    if config.backend == "scripted":
        return _scripted(config, policy)
    if policy is not None:
        raise ValueError(f"policy= only applies to the scripted backend, not {config.backend!r}")
    if config.backend == "openai":
        from josh.llm.openai import OpenAILLM

        return OpenAILLM(
            config.model or "",
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            max_concurrency=config.max_concurrency or 16,
            max_retries=config.max_retries,
            timeout_s=config.timeout_s,
            backoff_s=config.backoff_s,
            max_backoff_s=config.max_backoff_s,
            prices=config.prices,
            reasoning=config.reasoning,
        )
    if config.backend == "hf":
        from josh.llm.hf import HFLLM

        return HFLLM(
            config.model,
            adapter=config.adapter,
            dtype=config.dtype,
            device=config.device,
            load_in_4bit=config.load_in_4bit,
            merge_adapter=config.merge_adapter,
            max_batch_size=config.max_batch_size,
            batch_window_ms=config.batch_window_ms,
            max_prompt_tokens=config.max_prompt_tokens,
            prefix_cache_tokens=config.prefix_cache_tokens,
        )
    from josh.llm.vllm import VLLMLLM

    return VLLMLLM(
        config.model,
        adapter=config.adapter,
        dtype=config.dtype,
        max_batch_size=config.max_batch_size,
        batch_window_ms=config.batch_window_ms,
        max_prompt_tokens=config.max_prompt_tokens,
        gpu_memory_utilization=config.gpu_memory_utilization,
        max_model_len=config.max_model_len,
        tensor_parallel_size=config.tensor_parallel_size,
        max_lora_rank=config.max_lora_rank,
    )


def _scripted(config: LLMConfig, policy: Any) -> LLM:
    from josh.llm.scripted import ScriptedLLM

    if policy is None:
        policy = config.replies
    if policy is None or (isinstance(policy, Sequence) and not isinstance(policy, str) and not policy):
        raise ValueError(SCRIPTED_NEEDS_REPLIES)
    if isinstance(policy, str):
        policy = [policy]
    return ScriptedLLM(policy, latency_s=config.latency_s, max_concurrency=config.max_concurrency)
