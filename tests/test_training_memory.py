"""The lean CPU loss head gives TRL's losses and gradients while projecting only labelled positions; the Liger
switch fails with one clear error where it cannot run."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
fused = pytest.importorskip("trl.trainer.utils")

from josh.recipes import RecipeError, load_recipe  # noqa: E402
from josh.training import memory  # noqa: E402
from josh.training.config import base_arguments, check_liger_kernel  # noqa: E402

OUTPUTS = ("log_probs", "entropy", "is_top1")


def tiny_model(vocab: int = 9000):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    fused.add_fused_lm_head(model, outputs=OUTPUTS)
    return model


def loss_and_grads(model, batch):
    model.zero_grad()
    out = model(**batch, fused_lm_head=True)
    (out.loss + out.entropy.sum() * 0).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


@pytest.fixture
def restore_trl(monkeypatch):
    """The lean head patches TRL process-wide: put TRL back after each test."""
    monkeypatch.setattr(fused, "_use_triton", fused._use_triton)
    monkeypatch.setattr(fused, "_CHUNKED_LOGPROB_CHUNK_SIZE", fused._CHUNKED_LOGPROB_CHUNK_SIZE)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_lean_head_matches_trl_and_projects_only_labelled_positions(restore_trl, monkeypatch):
    model = tiny_model()
    ids = torch.randint(0, 9000, (2, 24))
    labels = ids.clone()
    labels[:, :15] = -100  # a prompt
    labels[1, 20:] = -100  # padding
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    before, grads_before = loss_and_grads(model, batch)

    seen: list[tuple[int, ...]] = []
    kernel = fused._ChunkedLogProbFunction.apply

    def spy(hidden, *args):
        seen.append((hidden.shape[0], fused._CHUNKED_LOGPROB_CHUNK_SIZE))
        return kernel(hidden, *args)

    monkeypatch.setattr(fused._ChunkedLogProbFunction, "apply", spy)
    assert memory.lean_loss_head() and memory.lean_loss_head()  # idempotent
    after, grads_after = loss_and_grads(model, batch)

    labelled = int((labels[:, 1:] != -100).sum())
    assert seen == [(labelled, memory.VOCAB_TILE)]
    torch.testing.assert_close(after.loss, before.loss)
    for name in ("log_probs", "entropy"):
        torch.testing.assert_close(getattr(after, name), getattr(before, name))
    assert torch.equal(after.is_top1, before.is_top1)
    assert grads_after.keys() == grads_before.keys() and grads_before
    for name, grad in grads_before.items():
        torch.testing.assert_close(grads_after[name], grad, rtol=1e-4, atol=1e-6)


def test_lean_head_leaves_cuda_machines_to_trl(restore_trl, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    triton_switch = fused._use_triton
    assert memory.lean_loss_head() is False
    assert fused._use_triton is triton_switch and fused._CHUNKED_LOGPROB_CHUNK_SIZE == 32768


def test_liger_switch_reaches_the_trainer_and_fails_clearly_without_a_gpu(tmp_path, monkeypatch):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    recipe = load_recipe(root / "recipes/tiny-sft.yaml", ["optim.liger_kernel=true"])
    assert base_arguments(recipe, tmp_path)["use_liger_kernel"] is True
    assert load_recipe(root / "recipes/tiny-sft.yaml").optim.liger_kernel is False
    check_liger_kernel(False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RecipeError, match="needs a CUDA GPU"):
        check_liger_kernel(True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(RecipeError, match=r"pip install 'josh\[liger\]'"):
        check_liger_kernel(True)
