"""Build LLM backends from a name and settings, or from a validated ``LLMConfig`` (recipes, the CLI).

    make_llm(backend: str, model: str | None = None, *, policy=None, **settings) -> LLM
    build_llm(config: LLMConfig, *, policy=None) -> LLM

Each backend (``hf``, ``vllm``, ``openai``, ``scripted``) is an entry of ``BACKENDS`` whose options model is its own
settings class, and ``LLMConfig`` is their union told apart by ``backend``: a setting the chosen backend does not
use (``--llm-option load_in_4bit=true --backend openai``) is an error naming the backend. ``policy`` is the scripted
backend's callable (or canned replies). Backend modules are imported only when built, so building a scripted or
openai backend never imports torch or vllm.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from josh.llm.base import LLM
from josh.registry import Registry

SETTINGS_FLAG = "--llm-option; setup.llm_options in a loop recipe"
BACKENDS = Registry("backend", "--backend", options_flag=SETTINGS_FLAG, fixed=("backend", "model"))


class _Settings(BaseModel):
    """What every backend config has: its name and model; ``packages`` it needs installed."""

    model_config = ConfigDict(extra="forbid")
    packages: ClassVar[tuple[str, ...]] = ()

    model: str | None = Field(None, description="hub id, local folder, adapter folder or 'smollm2' (hf/vllm default)")

    def settings(self) -> dict[str, Any]:
        """The backend's keyword arguments: every field but ``backend`` and ``model``."""
        return {name: getattr(self, name) for name in type(self).model_fields if name not in ("backend", "model")}


class _LocalSettings(_Settings):
    """Settings of the backends that run the model in this process."""

    adapter: str | None = Field(None, description="PEFT LoRA adapter folder applied on top of the model")
    max_batch_size: int = Field(32, ge=1, description="most sequences in one generate / engine call")
    batch_window_ms: float = Field(10.0, ge=0, description="how long to gather concurrent requests into a batch")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    max_prompt_tokens: int | None = Field(None, ge=1, description="longer prompts fail with LLMError")


class HFConfig(_LocalSettings):
    """transformers in this process (``josh.llm.hf.HFLLM``)."""

    packages: ClassVar[tuple[str, ...]] = ("torch", "transformers")
    backend: Literal["hf"] = "hf"
    device: str | None = Field(None, description="torch device; default cuda when available, else cpu")
    load_in_4bit: bool = Field(False, description="bitsandbytes NF4 weights (CUDA, or slowly on CPU)")
    merge_adapter: bool = Field(True, description="fold a LoRA adapter into a full-precision base (never 4-bit)")
    prefix_cache_tokens: int = Field(
        8192, ge=0, description="prompt-prefix tokens whose key/value states are kept for reuse (0: off)"
    )


class VLLMConfig(_LocalSettings):
    """An in-process vLLM engine (``josh.llm.vllm.VLLMLLM``)."""

    packages: ClassVar[tuple[str, ...]] = ("vllm",)
    backend: Literal["vllm"] = "vllm"
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=1)
    tensor_parallel_size: int = Field(1, ge=1)
    max_lora_rank: int = Field(64, ge=1)


class OpenAIConfig(_Settings):
    """Any OpenAI-compatible server (``josh.llm.openai.OpenAILLM``)."""

    backend: Literal["openai"] = "openai"
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key")
    max_concurrency: int = Field(16, ge=1, description="requests in flight at once")
    max_retries: int = Field(5, ge=0, description="retries on 429/5xx/timeouts/connection errors")
    timeout_s: float = Field(120.0, gt=0, description="per-request timeout")
    backoff_s: float = Field(0.5, ge=0, description="first retry's backoff (doubled on each retry, jittered)")
    max_backoff_s: float = Field(30.0, ge=0, description="longest wait between retries, Retry-After included")
    prices: dict[str, tuple[float, float]] | None = Field(
        None, description="USD per million (prompt, completion) tokens by model-name prefix"
    )
    reasoning: bool | None = Field(
        None, description="an OpenAI reasoning model (max_completion_tokens, no temperature); default: by name"
    )


class ScriptedConfig(_Settings):
    """Canned replies or a policy callable, no model (``josh.llm.scripted.ScriptedLLM``)."""

    backend: Literal["scripted"] = "scripted"
    replies: list[str] | None = Field(None, description="canned replies, cycled")
    latency_s: float = Field(0.0, ge=0, description="simulated seconds per request")
    max_concurrency: int | None = Field(None, ge=1, description="requests in flight at once")


LLMConfig = Annotated[HFConfig | VLLMConfig | OpenAIConfig | ScriptedConfig, Field(discriminator="backend")]
"""Everything needed to build one backend; each backend's settings are its own class."""

SCRIPTED_NEEDS_REPLIES = (
    'the scripted backend needs canned replies: --llm-option \'replies=["...", "..."]\' '
    "(setup.llm_options.replies in a loop recipe; policy= in Python)"
)


def llm_config(backend: str, model: str | None = None, **settings: Any) -> LLMConfig:
    """A validated config; a bad backend name or setting raises one ``ValueError`` line naming the backend."""
    entry = BACKENDS.get(backend)
    if entry.needs_model and not model:
        raise ValueError(f"the {entry.name} backend needs --model: {entry.summary}")
    return BACKENDS.parse(entry, {**settings, "backend": entry.name, "model": model})  # type: ignore[return-value]


def check_buildable(config: LLMConfig) -> None:
    """What ``build_llm`` would fail on, checked without loading anything: a missing package (``ImportError``
    naming the install command) or a scripted backend without replies (``ValueError``)."""
    import importlib.util

    for name in config.packages:
        if importlib.util.find_spec(name) is None:
            hint = "pip install 'josh[vllm]' (GPU only)" if name == "vllm" else "pip install 'josh[train]'"
            raise ImportError(f"the {config.backend} backend needs {name}, which is not installed: {hint}")
    if isinstance(config, ScriptedConfig) and not config.replies:
        raise ValueError(SCRIPTED_NEEDS_REPLIES)


def make_llm(backend: str, model: str | None = None, *, policy: Any = None, **settings: Any) -> LLM:
    """Build a backend by name; see the module docstring."""
    return build_llm(llm_config(backend, model, **settings), policy=policy)


def build_llm(config: LLMConfig, *, policy: Any = None) -> LLM:
    """Build the backend a config describes."""
    if policy is not None and config.backend != "scripted":
        raise ValueError(f"policy= only applies to the scripted backend, not {config.backend!r}")
    return BACKENDS.get(config.backend).builder(config, policy)


def _hf(config: HFConfig, policy: Any) -> LLM:
    from josh.llm.hf import HFLLM

    return HFLLM(config.model, **config.settings())


def _vllm(config: VLLMConfig, policy: Any) -> LLM:
    from josh.llm.vllm import VLLMLLM

    return VLLMLLM(config.model, **config.settings())


def _openai(config: OpenAIConfig, policy: Any) -> LLM:
    from josh.llm.openai import OpenAILLM

    return OpenAILLM(config.model or "", **config.settings())


def _scripted(config: ScriptedConfig, policy: Any) -> LLM:
    from josh.llm.scripted import ScriptedLLM

    if policy is None:
        policy = config.replies
    if policy is None or (isinstance(policy, Sequence) and not isinstance(policy, str) and not policy):
        raise ValueError(SCRIPTED_NEEDS_REPLIES)
    if isinstance(policy, str):
        policy = [policy]
    return ScriptedLLM(policy, latency_s=config.latency_s, max_concurrency=config.max_concurrency)


BACKENDS.register("hf", _hf, options=HFConfig, summary="transformers in this process")
BACKENDS.register("vllm", _vllm, options=VLLMConfig, summary="an in-process vLLM engine (GPU)")
BACKENDS.register(
    "openai",
    _openai,
    options=OpenAIConfig,
    needs_model=True,
    summary="the name the OpenAI-compatible server serves, e.g. gpt-4o-mini",
)
BACKENDS.register("scripted", _scripted, options=ScriptedConfig, summary="canned replies, no model")
