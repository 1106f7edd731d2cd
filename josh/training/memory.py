"""Lean training memory where TRL has no Triton kernels (CPU, Apple MPS).

TRL computes the SFT, KTO and DPO losses through a fused LM head that never builds the ``(batch, length,
vocabulary)`` logits. On CUDA it projects only the positions that carry a label. Elsewhere it projects every
position, prompts included, in tiles of 32,768 vocabulary columns and folds each tile with several temporaries of
the same size: on the offline SmolLM2 (49k vocabulary, batch 2, ~850 tokens a row) that fallback took the peak of
the tiny recipe from 2.0 GB to 3.7 GB. ``lean_loss_head`` points the fallback at the labelled positions only, in
tiles of 4,096 columns, for the duration of one ``with`` block (josh's runner wraps ``trainer.train()`` in it): the
same log-probabilities, entropies and accuracies, from a fraction of the memory.

It changes two private names of ``trl.trainer.utils`` (``_use_triton``, ``_CHUNKED_LOGPROB_CHUNK_SIZE``), so it is
made only on the TRL versions it was written against (``TRL_VERSIONS``). No upstream issue asks for this: TRL scores
every position off CUDA on purpose, for compiled backends (Neuron) that would recompile on every new number of
labelled positions (the comment above ``compact = _use_triton(...)`` in ``trl/trainer/utils.py``); its torch
fallback is kept as is by huggingface/trl#7244 (fused Triton kernels for the loss head, CUDA only).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from josh.util.patching import installed_within, replaced

VOCAB_TILE = 4096
EAGER_DEVICES = ("cpu", "mps")
TRL_VERSIONS = ">=1.16,<1.17"  # the TRL whose fused LM head this was written against (constraints.txt pins 1.16.0)


@contextmanager
def lean_loss_head() -> Iterator[bool]:
    """Inside the block TRL's fused LM head is lean on eager devices; TRL's own again after it. Yields False where
    nothing changes: a CUDA machine (its Triton path is already lean), a TRL without this head, or a TRL outside
    ``TRL_VERSIONS`` (its own fallback runs: the same numbers, a higher peak memory on CPU)."""
    import torch  # optional: the train extra

    try:
        import trl.trainer.utils as fused  # optional: the train extra
    except ImportError:
        yield False
        return
    if (
        torch.cuda.is_available()
        or not hasattr(fused, "_use_triton")
        or not hasattr(fused, "_CHUNKED_LOGPROB_CHUNK_SIZE")
        or not installed_within(
            TRL_VERSIONS,
            "trl",
            change="the lean CPU loss head (labelled positions only, 4,096-column tiles)",
            otherwise="TRL scores every position off CUDA: the same losses, a higher peak memory",
        )
    ):
        yield False
        return
    with ExitStack() as patches:
        patches.enter_context(replaced(fused, "_use_triton", _labelled_only(fused._use_triton)))
        patches.enter_context(replaced(fused, "_CHUNKED_LOGPROB_CHUNK_SIZE", VOCAB_TILE))
        yield True


def _labelled_only(uses_triton: Any) -> Any:
    """TRL's switch between projecting labelled positions only (True) and every position, made True on eager
    devices too (TRL's all-positions path exists for compiled backends that recompile on every new shape)."""

    def compact(device: Any) -> bool:
        return device.type in EAGER_DEVICES or uses_triton(device)

    return compact
