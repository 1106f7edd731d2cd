"""The loop's training stages through ``accelerate launch`` (the recipe's ``launch``): the command users run, the
launch checked before any work, and (slow) a round trained by 2 CPU processes (gloo) that average their gradients,
with the stage's outputs and resume as in-process."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from josh.loop.runner import Loop
from josh.training.launcher import LaunchedTrainer, LaunchSpec, _error_line
from josh.training.recipe import RecipeError
from tests.fakes.loop import builder, recipe

ROOT = Path(__file__).resolve().parents[2]
CPU_DDP = ROOT / "training" / "cpu_ddp.yaml"


def test_the_launch_is_the_command_users_run(tmp_path: Path) -> None:
    spec = LaunchSpec(config=CPU_DDP, processes=2, options=["--main_process_port", "29511"])
    command = spec.command(tmp_path / "r.yaml", tmp_path / "run", "kto", resume=True)
    assert command[1:7] == ["-m", "accelerate.commands.launch", "--config_file", str(CPU_DDP), "--num_processes", "2"]
    assert command[7:] == ["--main_process_port", "29511", "-m", "josh.training", "kto", "--recipe",
                           str(tmp_path / "r.yaml"), "--output", str(tmp_path / "run"), "--resume"]  # fmt: skip
    assert "--main_process_port" in LaunchSpec(config=CPU_DDP, processes=2).command(tmp_path, tmp_path, "sft", False)


def test_a_failed_launch_is_told_by_its_error_line_or_the_exit_code_of_its_first_failed_process(tmp_path: Path):
    log = tmp_path / "launch.log"
    log.write_text("$ accelerate launch ...\nerror: the recipe is wrong\nTraceback\n=======\n")
    assert _error_line(log) == "error: the recipe is wrong"
    log.write_text("Root Cause (first observed failure):\n  exitcode  : -9 (pid: 7)\n  exitcode  : 1\n=====\n")
    assert _error_line(log) == "exitcode : -9 (pid: 7)"


def test_a_launch_config_that_is_not_there_stops_the_loop_before_any_work(tmp_path: Path) -> None:
    launch = {"config": str(tmp_path / "missing.yaml"), "processes": 2}
    loop = Loop(recipe(tmp_path, launch=launch), builder=builder, progress=False)
    assert isinstance(loop.ctx.trainer, LaunchedTrainer)
    with pytest.raises(RecipeError, match="missing.yaml is not a file"):
        loop.run()
    assert not (tmp_path / "scripted").exists()


@pytest.mark.slow
def test_a_round_trains_in_two_launched_processes_and_resumes(tiny_smollm2: Path, tmp_path: Path) -> None:
    """The arm trains the small model of SmolLM2's architecture (``tiny_smollm2``): the launch is what is tested."""
    arm = {"model": {"name": str(tiny_smollm2), "dtype": "float32"}, "max_length": 2048, "report_to": []}
    arm["optim"] = {
        "max_steps": 2,
        "per_device_train_batch_size": 1,
        "gradient_checkpointing": True,
        "logging_steps": 1,
    }
    changes = {"warm_start": None, "kto": None, "sft": arm, "launch": {"config": str(CPU_DDP), "processes": 2}}
    options = {"examples": 0, "tool_listing": "none"}  # rows of 1.6k-1.9k tokens, tools included
    changes["setup"] = {"agent": "act", "backend": "scripted", "model": str(tiny_smollm2), "agent_options": options}
    changes["rollout"] = {"skip": 6, "tasks": 6, "search": {"max_beam": 2, "branching": 2, "max_depth": 4}}
    changes["extract"] = {"min_reward": 0.0}
    result = Loop(recipe(tmp_path, **changes), builder=builder, progress=False).run()
    train = tmp_path / "scripted" / "round-1" / "train-sft"
    assert [e.label for e in result.evaluated] == ["base", "round 1 JOSH-SFT"]
    assert "--num_processes 2" in (train / "launch.log").read_text()
    metrics = json.loads((train / "metrics.json").read_text())
    rows = metrics["rows"]
    assert metrics["global_step"] == 2 and math.isfinite(metrics["train_loss"]) and rows > 2
    # 2 processes of 1 row per step: an epoch is ceil(rows / 2) steps (one process alone: rows steps)
    assert metrics["trainer_metrics"]["epoch"] == pytest.approx(2 / math.ceil(rows / 2), abs=0.01)
    assert sorted(p.name for p in train.glob("*.safetensors")) == ["adapter_model.safetensors"]
    assert Loop(recipe(tmp_path, **changes), builder=builder, progress=False).run().ran == []
