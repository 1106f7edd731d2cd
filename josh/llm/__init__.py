"""LLM backends behind one async batched ``chat()``: hf, vllm, openai and scripted, built by ``make_llm``."""

from josh.core.llm import LLM, Completion, ContextLengthError, LLMError, Sampling, Usage
from josh.llm.factory import LLMConfig, build_llm, make_llm

__all__ = [
    "LLM",
    "Completion",
    "ContextLengthError",
    "LLMConfig",
    "LLMError",
    "Sampling",
    "Usage",
    "build_llm",
    "make_llm",
]
