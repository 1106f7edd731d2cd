"""Each backend's settings, a pydantic model of its own, and ``LLMConfig``, their union told apart by ``backend``.

Recipes (``setup.llm_options``) and the CLI (``--llm-option``) are validated against these; a setting the chosen
backend does not use is an error naming the backend.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


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
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="auto: bfloat16 on a GPU, float32 on a CPU"
    )
    max_prompt_tokens: int | None = Field(
        None, ge=1, description="a longer prompt ends its conversation (context_length)"
    )


class HFConfig(_LocalSettings):
    """transformers in this process (``josh.llm.hf.HFLLM``)."""

    packages: ClassVar[tuple[str, ...]] = ("torch", "transformers")
    backend: Literal["hf"] = "hf"
    max_batch_size: int = Field(32, ge=1, description="most sequences in one generate call")
    batch_window_ms: float = Field(10.0, ge=0, description="how long to gather concurrent requests into a batch")
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
    max_batch_size: int = Field(256, ge=1, description="most sequences the engine runs at once (max_num_seqs)")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="share of GPU memory the engine takes")
    kv_cache_gib: float | None = Field(
        None, gt=0, description="KV cache size in GiB (CPU default: $VLLM_CPU_KVCACHE_SPACE or 4)"
    )
    max_model_len: int | None = Field(None, ge=1, description="longest prompt + reply (default: the model's)")
    tensor_parallel_size: int = Field(1, ge=1)
    enable_lora: bool | None = Field(
        None, description="serve LoRA adapters (default: when an adapter is given and not merged)"
    )
    merge_adapter: bool | None = Field(
        None,
        description="serve the adapter the engine starts with folded into its base (a temporary full model folder, "
        "no LoRA; the engine then serves that one model); default: on a CPU, where vLLM's LoRA is slow, unless "
        "enable_lora=true; false: per-request LoRA, as on a GPU",
    )
    max_lora_rank: int | None = Field(
        None,
        ge=1,
        description="highest LoRA rank served (default: on a CPU the starting adapter's rank, rounded up to a size vLLM "
        "takes, since a CPU engine's LoRA work grows with this limit; else 64)",
    )
    max_loras: int = Field(4, ge=1, description="adapters one batch may mix")
    enforce_eager: bool | None = Field(None, description="no CUDA graphs / compilation (default: on a CPU only)")
    structured_outputs_backend: Literal["guidance", "xgrammar", "outlines", "auto"] = Field(
        "guidance", description="grammar engine; guidance (llguidance) decodes the grammars as the hf backend does"
    )
    engine_args: dict[str, Any] = Field(
        default_factory=dict, description='further vLLM engine arguments, e.g. {"swap_space": 8}'
    )

    @model_validator(mode="after")
    def _merged_or_lora(self) -> VLLMConfig:
        if self.merge_adapter and self.enable_lora:
            raise ValueError(
                "merge_adapter=true serves the adapter folded into its base, without LoRA; enable_lora=true serves "
                "it through LoRA: set one of them"
            )
        return self


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
    max_prompt_tokens: int | None = Field(
        None, ge=1, description="a longer prompt ends its conversation (context_length); needs --model to be a folder"
    )


class ScriptedConfig(_Settings):
    """Canned replies or a policy callable, no model (``josh.llm.scripted.ScriptedLLM``)."""

    backend: Literal["scripted"] = "scripted"
    replies: list[str] | None = Field(None, description="canned replies, cycled")
    latency_s: float = Field(0.0, ge=0, description="simulated seconds per request")
    max_concurrency: int | None = Field(None, ge=1, description="requests in flight at once")


LLMConfig = Annotated[HFConfig | VLLMConfig | OpenAIConfig | ScriptedConfig, Field(discriminator="backend")]
"""Everything needed to build one backend; each backend's settings are its own class."""

LLMKey = tuple[str, str | None, str | None]
"""One LLM of a run: (backend, model, base URL)."""
