"""Multi-process training launches for the tests: ``accelerate launch`` of ``python -m josh.training`` on CPU
processes, the rows they train on, and the checks every launched run shares."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.training_data import kto_rows, react_conversation, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {"sft": ROOT / "recipes" / "tiny-sft.yaml", "kto": ROOT / "recipes" / "tiny-kto.yaml"}
RECIPE = RECIPES["sft"]
SETTINGS = [
    "max_length=256",
    "optim.max_steps=2",
    "optim.gradient_checkpointing=false",
    "optim.learning_rate=2e-3",
    "optim.logging_steps=1",
]


def tiny_base(folder: Path) -> Path:
    """SmolLM2's tokenizer and chat template over a two-layer model of its architecture, randomly initialised and
    saved: the base the multi-process launches train. What they test is the launch (processes, gradients averaged,
    shards written, one adapter out, resume), which the 135M weights only make minutes slower."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from josh.llm.models import resolve_model

    path = resolve_model("smollm2")
    config = AutoConfig.from_pretrained(path)
    config.update({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2,
                   "num_key_value_heads": 1, "head_dim": 32})  # fmt: skip
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(path).save_pretrained(folder)
    return folder


def launch(
    launcher: list[str], data: Path, out: Path, *settings: str, method: str = "sft"
) -> subprocess.CompletedProcess:
    """``accelerate launch LAUNCHER -m josh.training METHOD`` on the tiny recipe, ``--set`` each setting."""
    command = [sys.executable, "-m", "accelerate.commands.launch", *launcher, "-m", "josh.training", method]
    command += ["--recipe", str(RECIPES[method]), "--data", str(data), "--output", str(out)]
    for setting in settings:
        command += ["--set", setting]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def four_sft_rows(path: Path) -> Path:
    """Four different conversations: ranks that did not average gradients would learn different adapters."""
    rows = [{"messages": react_conversation(food)} for food in ("chinese", "italian", "indian", "thai")]
    return write_jsonl(path, rows)


def four_kto_rows(path: Path) -> Path:
    """Two good and two bad short ReACT turns: one batch of 2 on each of two processes."""
    return write_jsonl(path, kto_rows(4, tools=False))


def finished_run(done: subprocess.CompletedProcess, run: Path, steps: int) -> dict[str, Any]:
    """The metrics of a launch that exited cleanly, reported once, trained ``steps`` steps with a finite loss and
    wrote one adapter."""
    assert done.returncode == 0, done.stderr[-3000:]
    assert (done.stdout + done.stderr).count("done:") == 1, "only the main process reports"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["global_step"] == steps
    assert math.isfinite(metrics["train_loss"]) and all(math.isfinite(h["loss"]) for h in metrics["loss_curve"])
    assert sorted(p.name for p in run.glob("*.safetensors")) == ["adapter_model.safetensors"]
    return metrics


def one_process_run(data: Path, out_dir: Path, *settings: str) -> Path:
    """The same tiny SFT in this process alone, with the rows all the launched processes saw in one batch of 4."""
    from josh.training.recipe import load_recipe
    from josh.training.runner import train

    overrides = [*SETTINGS, *settings, "optim.per_device_train_batch_size=2", f"data={data}", f"output_dir={out_dir}"]
    return train(load_recipe(RECIPE, [*overrides, "run_name=single"]), progress=False)


def assert_same_as_one_process(run: Path, single: Path) -> None:
    """Two processes that each trained on half the rows and combined their gradients saw every token once, reached
    the same loss and learned the same adapter as one process on all the rows."""
    import pytest
    from safetensors.torch import load_file

    metrics = json.loads((run / "metrics.json").read_text())
    alone = json.loads((single / "metrics.json").read_text())
    assert metrics["tokens"] == alone["tokens"], "the two processes together saw every token once"
    assert metrics["train_loss"] == pytest.approx(alone["train_loss"], rel=1e-4)

    two, one = load_file(run / "adapter_model.safetensors"), load_file(single / "adapter_model.safetensors")
    assert two.keys() == one.keys()
    # lora_B starts at zero, so it is the learned update itself; a process training alone on its own rows (the
    # launch before the fix) lands half the update's norm away; the same batch summed in another order, about 1e-5
    learned = [name for name in one if "lora_B" in name]
    assert relative_distance(two, one, learned) < 1e-3


def learned_update(adapter: dict) -> float:
    """The norm of the adapter's lora_B weights: they start at zero, so this is what training changed."""
    import torch

    return torch.cat([adapter[n].flatten() for n in adapter if "lora_B" in n]).norm().item()


def relative_distance(a: dict, b: dict, names: list[str]) -> float:
    import torch

    diff = torch.cat([(a[n] - b[n]).flatten() for n in names])
    return (diff.norm() / torch.cat([b[n].flatten() for n in names]).norm()).item()


def loads_for_inference(run: Path, adapter: dict) -> None:
    """josh's own loader (``josh.llm.hf``) attaches the run's adapter to the base model it names, unchanged."""
    import torch

    from josh.llm.config import HFConfig
    from josh.llm.hf import load_model

    net, _ = load_model(HFConfig(model=str(run), merge_adapter=False))
    assert type(net).__name__ == "PeftModelForCausalLM"
    loaded = {name: p for name, p in net.named_parameters() if "lora_B" in name}
    assert len(loaded) == sum("lora_B" in name for name in adapter) > 0
    for name, weight in loaded.items():
        assert torch.equal(weight.detach(), adapter[name.replace(".default", "")]), name
