"""The lean CPU loss head gives TRL's losses and gradients while projecting only labelled positions, inside its block
only and on the TRL it was written for; a plain TRL trainer after a josh run sees TRL as shipped; the Liger switch
fails with one clear error where it cannot run."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from josh.training import memory
from josh.training.config import base_arguments, check_liger_kernel
from josh.training.recipe import RecipeError, load_recipe

ROOT = Path(__file__).resolve().parents[2]

OUTPUTS = ("log_probs", "entropy", "is_top1")
TRL_TILE = 32768  # TRL's vocabulary tile


def tiny_model(vocab: int = 9000):
    import torch
    import trl.trainer.utils as fused
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
    """The fused forward's outputs and the gradients of its loss (the trainer logs entropy and accuracy only)."""
    model.zero_grad()
    out = model(**batch, fused_lm_head=True)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


@pytest.fixture
def fused(monkeypatch):
    """TRL's fused-head module as TRL ships it, on a machine without CUDA."""
    import torch
    import trl.trainer.utils as fused
    from trl.kernels.chunked_logprob import _use_triton

    monkeypatch.setattr(fused, "_use_triton", _use_triton)
    monkeypatch.setattr(fused, "_CHUNKED_LOGPROB_CHUNK_SIZE", TRL_TILE)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return fused


def test_lean_head_matches_trl_and_projects_only_labelled_positions(fused, monkeypatch):
    import torch

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
    shipped = fused._use_triton
    with memory.lean_loss_head() as lean, memory.lean_loss_head() as nested:
        after, grads_after = loss_and_grads(model, batch)
    assert lean and nested
    assert fused._use_triton is shipped and fused._CHUNKED_LOGPROB_CHUNK_SIZE == TRL_TILE  # TRL's own after the block

    labelled = int((labels[:, 1:] != -100).sum())
    assert seen == [(labelled, memory.VOCAB_TILE)]
    torch.testing.assert_close(after.loss, before.loss)
    for name in ("log_probs", "entropy"):
        torch.testing.assert_close(getattr(after, name), getattr(before, name))
    assert torch.equal(after.is_top1, before.is_top1)
    assert grads_after.keys() == grads_before.keys() and grads_before
    for name, grad in grads_before.items():
        torch.testing.assert_close(grads_after[name], grad, rtol=1e-4, atol=1e-6)


def test_lean_head_leaves_cuda_machines_to_trl(fused, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    triton_switch = fused._use_triton
    with memory.lean_loss_head() as lean:
        assert lean is False
        assert fused._use_triton is triton_switch and fused._CHUNKED_LOGPROB_CHUNK_SIZE == TRL_TILE


def test_lean_head_leaves_a_trl_it_was_not_written_for_as_it_is_and_says_so(fused, monkeypatch, caplog):
    monkeypatch.setattr(memory, "TRL_VERSIONS", ">=99")
    triton_switch = fused._use_triton
    with caplog.at_level(logging.WARNING, logger="josh"), memory.lean_loss_head() as lean:
        assert lean is False
        assert fused._use_triton is triton_switch and fused._CHUNKED_LOGPROB_CHUNK_SIZE == TRL_TILE
    assert "written for trl >=99" in caplog.text and "TRL scores every position off CUDA" in caplog.text


ISOLATION = """
import json, sys
meta_path, stderr = list(sys.meta_path), sys.stderr
import josh
assert sys.meta_path == meta_path and sys.stderr is stderr, "import josh changed the interpreter"
import trl.trainer.utils as fused
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer
from josh.training.recipe import load_recipe
from josh.training.runner import train

tiny, data, out = sys.argv[1:4]
shipped = (fused._use_triton, fused._CHUNKED_LOGPROB_CHUNK_SIZE)
seen = {"josh": [], "trl": []}
kernel = fused._ChunkedLogProbFunction.apply
def spy(hidden, *args):
    seen[trainer].append([hidden.shape[0], fused._CHUNKED_LOGPROB_CHUNK_SIZE])
    return kernel(hidden, *args)
fused._ChunkedLogProbFunction.apply = spy

trainer = "josh"
settings = [f"model.name={tiny}", f"data={data}", f"output_dir={out}", "optim.max_steps=1", "max_length=256"]
train(load_recipe(sys.argv[4], settings), progress=False)
after_josh = (fused._use_triton, fused._CHUNKED_LOGPROB_CHUNK_SIZE) == shipped and sys.stderr is stderr

trainer = "trl"
rows = [json.loads(line) for line in open(data)]
plain = SFTTrainer(
    model=AutoModelForCausalLM.from_pretrained(tiny),
    args=SFTConfig(output_dir=f"{out}/plain", max_steps=1, per_device_train_batch_size=1, report_to=[],
                   save_strategy="no", use_cpu=True, assistant_only_loss=True),
    train_dataset=Dataset.from_list(rows),
    processing_class=AutoTokenizer.from_pretrained(tiny),
)
plain.train()
print(json.dumps({"seen": seen, "after_josh": after_josh, "tile": shipped[1]}))
"""


@pytest.mark.slow
def test_a_plain_trl_trainer_after_a_josh_run_sees_trl_as_shipped(tiny_smollm2, tmp_path):
    """One process: ``import josh`` changes no import machinery, a josh SFT step trains with the lean head, then a
    plain TRL ``SFTTrainer`` on the same row trains with TRL's own head (every position, TRL's tile)."""
    from tests.training_data import react_conversation, write_jsonl

    data = write_jsonl(tmp_path / "sft.jsonl", [{"messages": react_conversation("chinese")}])
    recipe = ROOT / "recipes/tiny-sft.yaml"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    args = [sys.executable, "-c", ISOLATION, str(tiny_smollm2), str(data), str(tmp_path / "out"), str(recipe)]
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    josh_calls, trl_calls = result["seen"]["josh"], result["seen"]["trl"]
    assert result["after_josh"] and result["tile"] == TRL_TILE
    assert josh_calls and {tile for _, tile in josh_calls} == {memory.VOCAB_TILE}
    assert trl_calls and {tile for _, tile in trl_calls} == {TRL_TILE}
    assert max(rows for rows, _ in josh_calls) < min(rows for rows, _ in trl_calls)  # labelled positions vs all


def test_liger_switch_reaches_the_trainer_and_fails_clearly_without_a_gpu(tmp_path, monkeypatch):
    import torch

    recipe = load_recipe(ROOT / "recipes/tiny-sft.yaml", ["optim.use_liger_kernel=true"])
    assert base_arguments(recipe, tmp_path)["use_liger_kernel"] is True
    assert load_recipe(ROOT / "recipes/tiny-sft.yaml").optim.use_liger_kernel is False
    check_liger_kernel(False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RecipeError, match="needs a CUDA GPU"):
        check_liger_kernel(True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(RecipeError, match=r"pip install 'josh-agents\[liger\]'"):
        check_liger_kernel(True)


def test_cli_liger_switch_on_cpu_is_one_red_line(tmp_path, monkeypatch):
    import torch
    from typer.testing import CliRunner

    from josh.cli.main import app

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    recipe = ROOT / "recipes/tiny-sft.yaml"
    args = [
        "train",
        "sft",
        "-r",
        str(recipe),
        "--data",
        str(tmp_path / "sft.jsonl"),
        "--set",
        "optim.use_liger_kernel=true",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "error: optim.use_liger_kernel needs a CUDA GPU" in result.output and "Traceback" not in result.output
