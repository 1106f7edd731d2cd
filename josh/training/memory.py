"""Lean training memory where TRL has no Triton kernels (CPU, Apple MPS).

TRL computes the SFT, KTO and DPO losses through a fused LM head that never builds the ``(batch, length,
vocabulary)`` logits. On CUDA it projects only the positions that carry a label. Elsewhere it projects every
position, prompts included, in tiles of 32,768 vocabulary columns and folds each tile with several temporaries of
the same size: on the offline SmolLM2 (49k vocabulary, batch 2, ~850 tokens a row) that fallback took the peak of
the tiny recipe from 2.0 GB to 3.7 GB. ``lean_loss_head`` points the fallback at the labelled positions only, in
tiles of 4,096 columns: the same log-probabilities, entropies and accuracies, from a fraction of the memory.
"""

from __future__ import annotations

from typing import Any

VOCAB_TILE = 4096
EAGER_DEVICES = ("cpu", "mps")


def lean_loss_head() -> bool:
    """Make TRL's fused LM head lean on eager devices (process-wide, idempotent); False where it does not apply
    (a CUDA machine, whose Triton path is already lean, or a TRL without this head)."""
    import torch

    try:
        import trl.trainer.utils as fused
    except ImportError:
        return False
    if (
        torch.cuda.is_available()
        or not hasattr(fused, "_use_triton")
        or not hasattr(fused, "_CHUNKED_LOGPROB_CHUNK_SIZE")
    ):
        return False
    if not getattr(fused._use_triton, "josh_lean", False):
        fused._use_triton = _labelled_only(fused._use_triton)
    fused._CHUNKED_LOGPROB_CHUNK_SIZE = VOCAB_TILE
    return True


def _labelled_only(uses_triton: Any) -> Any:
    """TRL's switch between projecting labelled positions only (True) and every position, made True on eager
    devices too (TRL's all-positions path exists for compiled backends that recompile on every new shape)."""

    def compact(device: Any) -> bool:
        return device.type in EAGER_DEVICES or uses_triton(device)

    compact.josh_lean = True  # type: ignore[attr-defined]
    return compact
