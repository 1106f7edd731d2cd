"""How long a prompt may be, and counting it before it is sent to a server that would not say.

A request's prompt may take the model's context (its config's ``max_position_embeddings``) less the tokens the reply
may take, or ``max_prompt_tokens`` when that is lower; a longer one is refused with ``ContextLengthError``, the
conversation's own ending. The ``hf`` backend applies the rule to the prompts it tokenises. ``PromptCounter`` applies
it for the ``openai`` backend when its model name is a local model folder, which is how ``josh serve`` names what
it serves: ``transformers serve`` answers a prompt over the model's context with HTTP 200 and text generated past the
positions the model was trained on, so the backend counts each prompt first, as the ``hf`` backend renders it (the
folder's tokenizer and chat template, the tools included). The tokenizer loads once, on the first request, off the
event loop. A server behind any other name keeps its own check (an HTTP 400 that ``ContextLengthError.recognises``).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from josh.core.llm import ContextLengthError, LLMError
from josh.llm.models import chatml_template, render_chat
from josh.types import Message

CONFIG = "config.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def context_length(config: Any) -> int | None:
    """The most tokens, prompt and reply together, a model's config says it takes (``max_position_embeddings``, of
    its text model for a multimodal one); None when it names none."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else None
    for part in (config, text):
        value = getattr(part, "max_position_embeddings", None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def too_long(
    tokens: int, context: int | None, max_new_tokens: int, max_prompt_tokens: int | None
) -> ContextLengthError | None:
    """The error that refuses a prompt of ``tokens`` tokens, or None when it fits (see the module docstring)."""
    limits = [] if context is None else [context - max_new_tokens]
    limits += [max_prompt_tokens] if max_prompt_tokens else []
    if not limits or tokens <= min(limits):
        return None
    room = "the model's context unknown" if context is None else f"context {context}"
    return ContextLengthError(
        f"prompt has {tokens} tokens, over the limit of {min(limits)} (max_prompt_tokens={max_prompt_tokens}, "
        f"{room} minus max_new_tokens {max_new_tokens})"
    )


def model_folder(model: str, max_prompt_tokens: int | None = None) -> Path | None:
    """``model`` as a local model folder whose config and tokenizer the prompt can be counted with, else None (then
    ``max_prompt_tokens``, which needs such a folder, is a ``ValueError``)."""
    folder = Path(model).expanduser()
    if (folder / CONFIG).is_file() and any((folder / name).is_file() for name in TOKENIZER_FILES):
        return folder
    if max_prompt_tokens is not None:
        raise ValueError(
            f"max_prompt_tokens needs the openai backend's --model to be a local model folder (as josh serve names it) "
            f"to count prompt tokens with; {model!r} is not one"
        )
    return None


class PromptCounter:
    """Refuses the prompts a local model folder cannot take; its tokenizer and config load on the first ``check``."""

    def __init__(self, folder: Path, max_prompt_tokens: int | None = None) -> None:
        self.folder = folder
        self.max_prompt_tokens = max_prompt_tokens
        self.context: int | None = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def check(self, messages: list[Message], tools: list[dict[str, Any]] | None, max_new_tokens: int) -> int | None:
        """The prompt's tokens; ``ContextLengthError`` when they are too many. Blocking: call it off the event loop.

        A prompt the chat template cannot render is not counted (None): the server answers it with its own error.
        One count at a time: a fast tokenizer called from two threads at once can fail ("Already borrowed")."""
        with self._lock:
            tokenizer = self._loaded()
            text = render_chat(tokenizer, messages, tools)
            if isinstance(text, LLMError):
                return None
            tokens = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        error = too_long(tokens, self.context, max_new_tokens, self.max_prompt_tokens)
        if error is not None:
            raise error
        return tokens

    def _loaded(self) -> Any:
        """The folder's tokenizer, loaded (with the model's context) on first use; call it holding the lock."""
        if self._tokenizer is None:
            from transformers import AutoConfig, AutoTokenizer  # heavy: transformers, only for a counted backend

            try:
                config = AutoConfig.from_pretrained(self.folder)
                tokenizer = AutoTokenizer.from_pretrained(self.folder)
            except Exception as error:
                raise LLMError(
                    f"cannot count prompt tokens with the model folder {self.folder}: {type(error).__name__}: {error}"
                ) from error
            if not tokenizer.chat_template:
                tokenizer.chat_template = chatml_template()  # as the hf backend renders it
            self.context = context_length(config)
            self._tokenizer = tokenizer
        return self._tokenizer
