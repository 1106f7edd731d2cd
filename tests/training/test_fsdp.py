"""FSDP for real on CPU: ``accelerate launch --config_file training/fsdp.yaml --num_processes 2`` starts two CPU
processes (gloo) of ``josh train``; each holds half of every sharded layer, and one adapter comes out that josh's
loader serves. Before josh built the FSDP state itself, this launch trained plain DDP without a word (accelerate
pairs FSDP only with GPU process groups), and its sharded state dict left the run folder without an adapter."""

from __future__ import annotations

from pathlib import Path

import pytest

from josh.cli.serve import free_port
from tests.training_launch import (
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

FSDP = ["--config_file", "training/fsdp.yaml", "--num_processes", "2"]


def shards(folder: Path) -> list[str]:
    """The distributed-checkpoint files in ``folder``: one per process that held a shard."""
    return sorted(p.name for p in folder.glob("*.distcp"))


@pytest.mark.slow
def test_fsdp_sft_on_two_cpu_processes_learns_what_one_process_learns(tmp_path):
    from safetensors.torch import load_file

    rows = four_sft_rows(tmp_path / "sft.jsonl")
    # the shipped config, in full precision (bf16 is its default) so that it can be compared with one process
    launcher = [*FSDP, "--mixed_precision", "no", "--main_process_port", str(free_port())]
    run = tmp_path / "fsdp"
    done = launch(launcher, rows, run, *SETTINGS, "optim.per_device_batch_size=1")
    metrics = finished_run(done, run, steps=2)
    assert metrics["trainer_metrics"]["epoch"] == 1.0, "2 steps x 2 processes x 1 row: every row once"
    # FSDP, not DDP: the checkpoint is sharded, one shard of the model per process (DDP saves a plain adapter)
    assert shards(run / "checkpoint-2" / "pytorch_model_fsdp_0") == ["__0_0.distcp", "__1_0.distcp"]
    assert not (run / "checkpoint-2" / "adapter_model.safetensors").exists()

    assert_same_as_one_process(run, one_process_run(rows, tmp_path))
    adapter = load_file(run / "adapter_model.safetensors")
    assert learned_update(adapter) > 0
    loads_for_inference(run, adapter)


@pytest.mark.slow
def test_fsdp_kto_step_with_the_shipped_config(tmp_path):
    from safetensors.torch import load_file

    rows = four_kto_rows(tmp_path / "kto.jsonl")
    launcher = [*FSDP, "--main_process_port", str(free_port())]  # as shipped: bf16 mixed precision
    run = tmp_path / "kto"
    done = launch(launcher, rows, run, "max_length=256", "optim.max_steps=1", "optim.gradient_checkpointing=false",
                  method="kto")  # fmt: skip
    metrics = finished_run(done, run, steps=1)
    assert metrics["rows"] == 4 and metrics["trainer_metrics"]["epoch"] == 1.0, "one batch of 2 on each process"
    assert shards(run / "checkpoint-1" / "pytorch_model_fsdp_0") == ["__0_0.distcp", "__1_0.distcp"]

    adapter = load_file(run / "adapter_model.safetensors")
    assert learned_update(adapter) > 0
    loads_for_inference(run, adapter)
