"""Prefix caching for the ``hf`` backend: prompt tokens a batch shares are computed once, not once per row.

Rows of a batch often start alike: every conversation of an evaluation carries the same system prompt and tool
schemas, the ``n`` samples of an agent turn share their whole prompt, and the next turn of a conversation extends the
prompt of the last one. ``PrefixCache`` keeps the key/value states of recent shared prefixes (computed at batch size
one, least recently used dropped beyond a token budget). For a new batch it takes the rows' common prefix, finds the
stored prefix that covers most of it, computes only the missing tokens on top, and fills the batch's cache with the
result repeated for every row. Rows are then laid out as ``[shared prefix | padding | own suffix]`` with the padding
masked out, so each row's positions run on without a gap. Models whose cache is not plain full attention (sliding
windows, linear attention) are detected on first use and served without prefix caching.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

log = logging.getLogger(__name__)


@dataclass(eq=False)
class SharedPrefix:
    """The first ``len(tokens)`` tokens of every row in a batch, with their per-layer (keys, values) at batch 1."""

    tokens: tuple[int, ...]
    layers: list[tuple[torch.Tensor, torch.Tensor]]

    def __len__(self) -> int:
        return len(self.tokens)

    def cut(self, length: int) -> SharedPrefix:
        """The first ``length`` tokens of this prefix (causal attention: their states do not depend on later ones)."""
        return SharedPrefix(self.tokens[:length], [(k[:, :, :length], v[:, :, :length]) for k, v in self.layers])

    def fill(self, cache: Any, rows: int) -> None:
        """Write this prefix into an empty transformers cache for ``rows`` rows."""
        for index, (keys, values) in enumerate(self.layers):
            cache.update(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1), index)


def common_length(a: tuple[int, ...] | list[int], b: tuple[int, ...] | list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class PrefixCache:
    """Key/value states of recently shared prompt prefixes; see the module docstring."""

    def __init__(self, net: Any, *, max_tokens: int = 8192, min_tokens: int = 16) -> None:
        self.net = net
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.entries: list[SharedPrefix] = []  # most recently used last
        self.enabled = max_tokens > 0
        self.saved_tokens = 0  # prompt tokens not computed thanks to the cache

    def shared(self, prompts: list[list[int]]) -> SharedPrefix | None:
        """The prefix all ``prompts`` start with (each keeps at least one own token), or None when too short."""
        if not self.enabled:
            return None
        length = min(len(p) for p in prompts) - 1
        for prompt in prompts[1:]:
            length = common_length(prompts[0][:length], prompt)
        if length < self.min_tokens:
            return None
        tokens = tuple(prompts[0][:length])
        reuse, best = max(
            ((common_length(e.tokens, tokens), e) for e in self.entries), key=lambda m: m[0], default=(0, None)
        )
        base = best.cut(reuse) if best is not None and reuse else None
        prefix = base if reuse == length else self._extend(base, tokens)
        if prefix is None:
            return None
        self.saved_tokens += length * len(prompts) - (length - reuse)
        self._remember(prefix, best if reuse == length else None)
        return prefix

    def _extend(self, base: SharedPrefix | None, tokens: tuple[int, ...]) -> SharedPrefix | None:
        """Compute the states of ``tokens`` on top of ``base`` (their first tokens), or None if the model's cache
        layers are not plain full attention."""
        start = len(base) if base is not None else 0
        cache = DynamicCache(config=self.net.config)
        if base is not None:
            base.fill(cache, 1)
        new = torch.tensor([tokens[start:]], device=self.net.device)
        try:
            with torch.inference_mode():
                self.net(input_ids=new, past_key_values=cache, use_cache=True, logits_to_keep=1)
        except TypeError as exc:  # a model whose forward takes no cache or logits_to_keep
            return self._disable(f"the model's forward does not take a cache ({exc})")
        layers = getattr(cache, "layers", [])
        if not layers or any(
            type(layer) is not DynamicLayer or layer.keys.shape[-2] != len(tokens) for layer in layers
        ):
            return self._disable("this model's cache is not plain full attention")
        return SharedPrefix(tokens, [(layer.keys, layer.values) for layer in layers])

    def _disable(self, reason: str) -> None:
        log.warning("prefix caching disabled: %s", reason)
        self.enabled, self.entries = False, []

    def _remember(self, prefix: SharedPrefix, used: SharedPrefix | None) -> None:
        """Keep ``prefix`` as the most recent entry; entries it covers and the least recent beyond budget go."""
        if used is not None:
            self.entries.remove(used)
            self.entries.append(used)
            return
        if len(prefix) > self.max_tokens:
            return
        self.entries = [e for e in self.entries if common_length(e.tokens, prefix.tokens) < len(e)]
        self.entries.append(prefix)
        while sum(len(e) for e in self.entries) > self.max_tokens:
            self.entries.pop(0)
