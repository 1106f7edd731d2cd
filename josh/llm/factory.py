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

import importlib.util
from collections.abc import Sequence
from typing import Any

from josh.core.llm import LLM
from josh.llm.config import HFConfig, LLMConfig, OpenAIConfig, ScriptedConfig, VLLMConfig
from josh.llm.prompt_limit import model_folder
from josh.llm.scripted import ScriptedLLM
from josh.plugins import GROUPS
from josh.registry import Registry
from josh.util.errors import VLLM_INSTALL

SETTINGS_FLAG = "--llm-option; setup.llm_options in a loop recipe"
BACKENDS = Registry(
    "backend", "--backend", options_flag=SETTINGS_FLAG, fixed=("backend", "model"), group=GROUPS["backend"]
)


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
    naming the install command), a scripted backend without replies or an openai one with ``max_prompt_tokens`` and
    no model folder to count with (``ValueError``)."""
    for name in config.packages:
        if importlib.util.find_spec(name) is None:
            hint = VLLM_INSTALL if name == "vllm" else "pip install 'josh-agents[train]'"
            raise ImportError(f"the {config.backend} backend needs {name}, which is not installed: {hint}")
    if isinstance(config, ScriptedConfig) and not config.replies:
        raise ValueError(SCRIPTED_NEEDS_REPLIES)
    if isinstance(config, OpenAIConfig):
        model_folder(config.model or "", config.max_prompt_tokens)


def make_llm(backend: str, model: str | None = None, *, policy: Any = None, **settings: Any) -> LLM:
    """Build a backend by name; see the module docstring."""
    return build_llm(llm_config(backend, model, **settings), policy=policy)


def build_llm(config: LLMConfig, *, policy: Any = None) -> LLM:
    """Build the backend a config describes."""
    if policy is not None and config.backend != "scripted":
        raise ValueError(f"policy= only applies to the scripted backend, not {config.backend!r}")
    return BACKENDS.get(config.backend).builder(config, policy)


def _hf(config: HFConfig, policy: Any) -> LLM:
    from josh.llm.hf import HFLLM  # optional: the train extra

    return HFLLM(config.model, **config.settings())


def _vllm(config: VLLMConfig, policy: Any) -> LLM:
    from josh.llm.vllm import VLLMLLM  # heavy: the engine's process machinery (multiprocessing)

    return VLLMLLM(config.model, **config.settings())


def _openai(config: OpenAIConfig, policy: Any) -> LLM:
    from josh.llm.openai import OpenAILLM  # heavy: openai

    return OpenAILLM(config.model or "", **config.settings())


def _scripted(config: ScriptedConfig, policy: Any) -> LLM:
    if policy is None:
        policy = config.replies
    if policy is None or (isinstance(policy, Sequence) and not isinstance(policy, str) and not policy):
        raise ValueError(SCRIPTED_NEEDS_REPLIES)
    if isinstance(policy, str):
        policy = [policy]
    return ScriptedLLM(policy, latency_s=config.latency_s, max_concurrency=config.max_concurrency)


BACKENDS.register("hf", _hf, options=HFConfig, summary="transformers in this process")
BACKENDS.register("vllm", _vllm, options=VLLMConfig, summary="an in-process vLLM engine (GPU, or vLLM's CPU build)")
BACKENDS.register(
    "openai",
    _openai,
    options=OpenAIConfig,
    needs_model=True,
    summary="the name the OpenAI-compatible server serves, e.g. gpt-4o-mini",
)
BACKENDS.register("scripted", _scripted, options=ScriptedConfig, summary="canned replies, no model")
