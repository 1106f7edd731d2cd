"""Data-parallel training for real: ``accelerate launch`` starts two CPU processes (gloo) of ``josh train sft``;
both train, their gradients are averaged, and one adapter and one metrics.json come out (the launches are slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from josh.serving import free_port
from tests.training_data import react_conversation, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "tiny-sft.yaml"
SETTINGS = [
    "max_length=256",
    "optim.max_steps=2",
    "optim.gradient_checkpointing=false",
    "optim.learning_rate=2e-3",
    "optim.logging_steps=1",
]


def launch(launcher: list[str], data: Path, out: Path, *settings: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "accelerate.commands.launch", *launcher, "-m", "josh.training", "sft"]
    command += ["--recipe", str(RECIPE), "--data", str(data), "--output", str(out)]
    for setting in settings:
        command += ["--set", setting]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def four_rows(tmp_path) -> Path:
    """Four different conversations: ranks that did not average gradients would learn different adapters."""
    rows = [{"messages": react_conversation(food)} for food in ("chinese", "italian", "indian", "thai")]
    return write_jsonl(tmp_path / "sft.jsonl", rows)


@pytest.mark.slow
def test_two_cpu_processes_train_one_adapter_with_averaged_gradients(tmp_path, four_rows):
    from safetensors.torch import load_file

    from josh.recipes import load_recipe
    from josh.training.runner import train

    launcher = ["--config_file", "training/cpu_ddp.yaml", "--num_processes", "2"]
    launcher += ["--main_process_port", str(free_port())]
    done = launch(launcher, four_rows, tmp_path / "ddp", *SETTINGS, "optim.per_device_batch_size=1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (done.stdout + done.stderr).count("done:") == 1, "only the main process reports"
    ddp = tmp_path / "ddp"
    metrics = json.loads((ddp / "metrics.json").read_text())
    # 2 steps x 2 processes x 1 row = all 4 rows: one process alone would have seen half of them
    assert metrics["global_step"] == 2 and metrics["trainer_metrics"]["epoch"] == 1.0
    assert sorted(p.name for p in ddp.glob("*.safetensors")) == ["adapter_model.safetensors"]

    overrides = [*SETTINGS, "optim.per_device_batch_size=2", f"data={four_rows}", f"output_dir={tmp_path}"]
    single = train(load_recipe(RECIPE, [*overrides, "run_name=single"]), progress=False)
    alone = json.loads((single / "metrics.json").read_text())
    assert metrics["tokens"] == alone["tokens"], "the two processes together saw every token once"
    assert metrics["train_loss"] == pytest.approx(alone["train_loss"], rel=1e-4)

    two, one = load_file(ddp / "adapter_model.safetensors"), load_file(single / "adapter_model.safetensors")
    assert two.keys() == one.keys()
    # lora_B starts at zero, so it is the learned update itself; a process training alone on its own rows (the
    # launch before the fix) lands half the update's norm away; the same batch summed in another order, about 1e-5
    learned = [name for name in one if "lora_B" in name]
    assert relative_distance(two, one, learned) < 1e-3


def relative_distance(a: dict, b: dict, names: list[str]) -> float:
    import torch

    diff = torch.cat([(a[n] - b[n]).flatten() for n in names])
    return (diff.norm() / torch.cat([b[n].flatten() for n in names]).norm()).item()


@pytest.mark.slow
def test_cpu_flag_with_several_processes_is_refused(tmp_path, four_rows):
    done = launch(["--cpu", "--num_processes", "2"], four_rows, tmp_path / "run")
    assert done.returncode != 0
    assert "training/cpu_ddp.yaml" in done.stderr and "started 1 process" in done.stderr
    assert not (tmp_path / "run").exists()


def test_only_a_single_process_cpu_launch_is_refused(monkeypatch):
    from josh.training.launch import LaunchError, check_cpu_launch, world_size

    for name in ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MASTER_ADDR", "ACCELERATE_USE_CPU"):
        monkeypatch.delenv(name, raising=False)
    assert world_size() == 1
    check_cpu_launch()  # a plain `josh train`
    monkeypatch.setenv("ACCELERATE_USE_CPU", "True")
    check_cpu_launch()  # `accelerate launch --cpu` with one process sets no MASTER_ADDR
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.raises(LaunchError, match="cpu_ddp.yaml"):
        check_cpu_launch()
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert world_size() == 2
    check_cpu_launch()  # a real multi-process launch
