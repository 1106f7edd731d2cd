"""Data-parallel training for real: ``accelerate launch`` starts two CPU processes (gloo) of ``josh train sft``;
both train, their gradients are averaged, and one adapter and one metrics.json come out (the launches are slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from josh.cli.serve import free_port
from tests.training_launch import (
    SETTINGS,
    assert_same_as_one_process,
    finished_run,
    four_sft_rows,
    launch,
    one_process_run,
)


@pytest.fixture
def four_rows(tmp_path) -> Path:
    return four_sft_rows(tmp_path / "sft.jsonl")


@pytest.mark.slow
def test_two_cpu_processes_train_one_adapter_with_averaged_gradients(tmp_path, four_rows):
    launcher = ["--config_file", "training/cpu_ddp.yaml", "--num_processes", "2"]
    launcher += ["--main_process_port", str(free_port())]
    done = launch(launcher, four_rows, tmp_path / "ddp", *SETTINGS, "optim.per_device_train_batch_size=1")
    metrics = finished_run(done, tmp_path / "ddp", steps=2)
    # 2 steps x 2 processes x 1 row = all 4 rows: one process alone would have seen half of them
    assert metrics["trainer_metrics"]["epoch"] == 1.0
    assert_same_as_one_process(tmp_path / "ddp", one_process_run(four_rows, tmp_path))


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
