"""DeepSpeed ZeRO-3 for real on CPU: ``accelerate launch --config_file training/deepspeed_zero3.yaml
--num_processes 2`` starts two CPU processes of ``josh train``; DeepSpeed's CPU accelerator joins them with gloo
(no oneCCL needed), each process keeps its own partition of the trainable weights and their optimizer state, and
one adapter comes out that josh's loader serves. DeepSpeed is an optional extra: these tests run where it is
installed (``pip install 'josh[deepspeed]'``; with g++ there, its first launch builds a small shared-memory op)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("deepspeed")

from josh.cli.serve import free_port  # noqa: E402
from tests.training_launch import (  # noqa: E402
    SETTINGS,
    assert_same_as_one_process,
    finished_run,
    four_kto_rows,
    four_sft_rows,
    launch,
    learned_update,
    loads_for_inference,
    one_process_run,
)

ZERO3 = ["--config_file", "training/deepspeed_zero3.yaml", "--num_processes", "2"]


def partitions(step: Path) -> list[str]:
    """The optimizer-state files of a ZeRO checkpoint step: one per process that held a partition."""
    return sorted(p.name for p in step.glob("zero_pp_rank_*_optim_states.pt"))


@pytest.mark.slow
def test_zero3_sft_on_two_cpu_processes_learns_what_one_process_learns(tmp_path):
    from safetensors.torch import load_file

    rows = four_sft_rows(tmp_path / "sft.jsonl")
    run = tmp_path / "zero3"
    launcher = [*ZERO3, "--main_process_port", str(free_port())]
    done = launch(launcher, rows, run, *SETTINGS, "optim.per_device_batch_size=1")
    metrics = finished_run(done, run, steps=2)
    assert metrics["trainer_metrics"]["epoch"] == 1.0, "2 steps x 2 processes x 1 row: every row once"
    assert partitions(run / "checkpoint-2" / "global_step2") == [
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt",
    ]

    assert_same_as_one_process(run, one_process_run(rows, tmp_path))
    adapter = load_file(run / "adapter_model.safetensors")
    assert learned_update(adapter) > 0
    loads_for_inference(run, adapter)


@pytest.mark.slow
def test_zero3_kto_step(tmp_path):
    from safetensors.torch import load_file

    rows = four_kto_rows(tmp_path / "kto.jsonl")
    run = tmp_path / "kto"
    launcher = [*ZERO3, "--main_process_port", str(free_port())]
    done = launch(launcher, rows, run, "max_length=256", "optim.max_steps=1", "optim.gradient_checkpointing=false",
                  method="kto")  # fmt: skip
    metrics = finished_run(done, run, steps=1)
    assert metrics["rows"] == 4 and metrics["trainer_metrics"]["epoch"] == 1.0, "one batch of 2 on each process"
    assert len(partitions(run / "checkpoint-1" / "global_step1")) == 2

    adapter = load_file(run / "adapter_model.safetensors")
    assert learned_update(adapter) > 0
    loads_for_inference(run, adapter)
