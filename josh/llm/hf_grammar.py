"""Grammar-constrained decoding for the hf backend: rows whose request carries ``Sampling.grammar`` may only produce
tokens that keep their text inside that grammar (llguidance's Lark dialect, with ``%json {...}`` for JSON-schema
parts), so a tool call's name, argument keys and enum values are always valid and only free values are sampled.

``GrammarMask`` runs before ``RowSampler`` in the same ``generate``: each constrained row has its own
``llguidance.LLMatcher``; at every step the matcher consumes the token the row chose last, then its bitmask sets
every token the grammar forbids to ``-inf``. A finished grammar allows only the stop tokens. Rows without a grammar
are left untouched, so constrained and free requests share a batch.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor


def require_llguidance() -> Any:
    """The ``llguidance`` module, or one clear error saying how to get it."""
    try:
        import llguidance  # optional: the train extra
        import llguidance.hf  # optional: the train extra
        import llguidance.torch  # optional: the train extra
    except ImportError as exc:
        raise ImportError(
            "constrained decoding (the agent option constrain) needs llguidance: pip install 'josh-agents[train]'"
        ) from exc
    return llguidance


def grammar_tokenizer(tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> Any:
    """llguidance's view of a transformers tokenizer (built once per backend: it indexes the whole vocabulary)."""
    llguidance = require_llguidance()
    return llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=list(stop_ids))


@functools.lru_cache(maxsize=256)
def grammar_problem(grammar: str) -> str | None:
    """Why ``grammar`` does not compile, or ``None`` when it does."""
    llguidance = require_llguidance()
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    return "; ".join(messages) or "invalid grammar" if is_error else None


class GrammarMask(LogitsProcessor):
    """Mask each constrained row's logits to the tokens its grammar allows next; see the module docstring. The
    backend checks every grammar with ``grammar_problem`` before a row reaches a batch."""

    def __init__(self, grammars: list[str | None], ll_tokenizer: Any, prompt_width: int) -> None:
        llguidance = require_llguidance()
        self.width = prompt_width
        self.rows = [i for i, g in enumerate(grammars) if g]
        self.matchers = {i: llguidance.LLMatcher(ll_tokenizer, grammars[i]) for i in self.rows}
        self.mask: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        import llguidance.torch as ll_torch  # optional: the train extra

        if not self.rows:
            return scores
        if self.mask is None:
            self.mask = ll_torch.allocate_token_bitmask(len(self.rows), scores.shape[1])
        fresh = input_ids.shape[1] == self.width
        for k, i in enumerate(self.rows):
            matcher = self.matchers[i]
            if not fresh and not matcher.is_stopped() and not matcher.is_error():
                matcher.consume_token(int(input_ids[i, -1]))
            if matcher.is_error():  # the row already stopped (generate pads finished rows): leave it free
                self.mask[k].fill_(-1)
                continue
            ll_torch.fill_next_token_bitmask(matcher, self.mask, k)
        allowed = unpack_bits(self.mask.numpy(), scores.shape[1])
        if scores.device.type == "cpu":
            view = scores.numpy()
            for k, i in enumerate(self.rows):
                np.putmask(view[i], ~allowed[k], -np.inf)
            return scores
        rows = torch.tensor(self.rows, device=scores.device)
        forbidden = ~torch.from_numpy(allowed).to(scores.device)
        scores[rows] = scores[rows].masked_fill(forbidden, float("-inf"))
        return scores


def unpack_bits(mask: np.ndarray, width: int) -> np.ndarray:
    """A packed int32 token bitmask (bit ``t % 32`` of word ``t // 32`` set: token ``t`` allowed) as booleans.

    Done in numpy on one thread: the same few element-wise torch ops cost tens of milliseconds per step on a busy
    CPU (and llguidance's own ``apply_token_bitmask_inplace`` is ``torch.compile``d, i.e. compiles C++ on first use)."""
    bits = np.unpackbits(mask.astype("<i4").view(np.uint8), axis=-1, bitorder="little")
    return bits[:, :width].astype(bool)
