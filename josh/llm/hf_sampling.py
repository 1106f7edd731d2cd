"""Per-sequence decoding for one batched ``generate``: each row keeps its own sampling parameters, random
generator, stop strings and token limit, so requests with different settings share a batch and a seeded request
gives the same samples whatever else is in its batch.

``RowSampler`` draws each row's next token itself (temperature, top-k, top-p, inverse-CDF sampling with one uniform
draw per step from the row's own ``torch.Generator``) and leaves only that token finite, so ``generate`` runs in greedy mode and simply takes it.
``RowStopper`` ends a row when its text contains one of its stop strings or it reached its own token limit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch
from transformers import LogitsProcessor, StoppingCriteria

_SEED_MIX = 0x9E3779B97F4A7C15
_SYSTEM_RANDOM = random.SystemRandom()
_CANDIDATES = (256, 4096)  # widths ranked (torch.topk) before falling back to sorting the whole vocabulary


def row_seed(seed: int | None, index: int) -> int:
    """The generator seed of sample ``index`` of a request: derived from ``seed`` when given, else fresh entropy."""
    if seed is None:
        return _SYSTEM_RANDOM.getrandbits(63)
    return (seed * _SEED_MIX + index * 0x2545F4914F6CDD1D + 1) % (1 << 63)


@dataclass
class RowSpec:
    """How one sequence of the batch is decoded."""

    temperature: float
    top_p: float
    top_k: int | None
    seed: int
    max_new_tokens: int
    stop: list[str] = field(default_factory=list)
    grammar: str | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


class RowSampler(LogitsProcessor):
    """Choose each row's next token with its own parameters and generator; all other logits become -inf."""

    def __init__(self, rows: list[RowSpec]) -> None:
        self.rows = rows
        self.generators = [torch.Generator().manual_seed(r.seed) for r in rows]
        self.temperature = torch.tensor([r.temperature if not r.greedy else 1.0 for r in rows])
        self.top_p = torch.tensor([min(max(r.top_p, 0.0), 1.0) for r in rows])
        self.greedy = torch.tensor([r.greedy for r in rows])
        self.filtered = torch.tensor([bool(r.top_k) or r.top_p < 1.0 for r in rows])

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        logits = scores.float()
        device = logits.device
        draws = torch.cat([torch.rand(1, generator=g) for g in self.generators]).to(device)
        probs = torch.softmax(logits / self.temperature.to(device)[:, None], dim=-1)
        choice = _inverse_cdf(probs, draws)
        if self.filtered.any():
            filtered = self.filtered.to(device)
            choice = torch.where(filtered, self._sample_filtered(probs, draws, filtered), choice)
        choice = torch.where(self.greedy.to(device), scores.argmax(dim=-1), choice)
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(1, choice[:, None], 0.0)
        return out

    def _sample_filtered(self, probs: torch.Tensor, draws: torch.Tensor, filtered: torch.Tensor) -> torch.Tensor:
        """Top-k / top-p sampling. The nucleus almost always lies within the most likely few hundred tokens, so
        only the top candidates are ranked (a partial sort is far cheaper on CPU), widening when a row needs more."""
        vocab = probs.shape[-1]
        top_k = torch.tensor([r.top_k or vocab for r in self.rows], device=probs.device)
        top_p = self.top_p.to(probs.device)
        ranked, order = self._rank(probs, filtered, top_k, top_p)
        ranks = torch.arange(ranked.shape[-1], device=probs.device)[None, :]
        keep = (ranks < top_k[:, None]) & ((ranked.cumsum(dim=-1) - ranked) < top_p[:, None])
        keep[:, 0] = True
        position = _inverse_cdf(ranked * keep, draws)
        return order.gather(1, position[:, None]).squeeze(1)

    @staticmethod
    def _rank(
        probs: torch.Tensor, filtered: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The most likely tokens in order, enough of them to hold every filtered row's top-k and top-p set."""
        for width in _CANDIDATES:
            if width >= probs.shape[-1]:
                break
            ranked, order = probs.topk(width, dim=-1)
            short = filtered & (top_k > width) & (ranked.sum(dim=-1) < top_p)
            if not short.any():
                return ranked, order
        return probs.sort(dim=-1, descending=True)


def _inverse_cdf(probs: torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
    """Per row, the first index whose cumulative (unnormalised) probability exceeds ``draw * total``.

    A blocked ``cumsum`` can round its total a hair above the sum up to the last likely token, so the index is kept
    at or before the last token with non-zero probability (masked tokens must never be drawn)."""
    cumulative = probs.cumsum(dim=-1)
    targets = (draws * cumulative[:, -1])[:, None]
    index = torch.searchsorted(cumulative, targets, right=True).squeeze(1)
    last = probs.shape[-1] - 1 - (probs.flip(-1) > 0).int().argmax(dim=-1)
    return torch.minimum(index, last)


class RowStopper(StoppingCriteria):
    """Finish a row at its own token limit or once its new text contains one of its stop strings."""

    def __init__(self, rows: list[RowSpec], prompt_length: int, tokenizer) -> None:
        self.rows = rows
        self.prompt_length = prompt_length
        self.tokenizer = tokenizer
        self.limits = torch.tensor([r.max_new_tokens for r in rows])
        # a token decodes to at least one character, so the longest stop string fits in this many tail tokens
        self.tail = [max((len(s) for s in r.stop), default=0) + 2 for r in rows]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        generated = input_ids.shape[1] - self.prompt_length
        done = (self.limits <= generated).tolist()
        for i, row in enumerate(self.rows):
            if row.stop and not done[i]:
                start = max(self.prompt_length, input_ids.shape[1] - self.tail[i])
                text = self.tokenizer.decode(input_ids[i, start:], skip_special_tokens=True)
                done[i] = any(s in text for s in row.stop)
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)
