"""Sharded training for real on CPU: ``accelerate launch --config_file CONFIG --num_processes 2`` starts two CPU
processes (gloo) of ``josh train``, each holding its share of the trainable weights, and one adapter comes out that
josh's loader serves.

- FSDP (``training/fsdp.yaml``): each process holds half of every sharded layer. Before josh built the FSDP state
  itself, this launch trained plain DDP without a word (accelerate pairs FSDP only with GPU process groups), and its
  sharded state dict left the run folder without an adapter.
- DeepSpeed ZeRO-3 (``training/deepspeed_zero3.yaml``): DeepSpeed's CPU accelerator joins the processes with gloo (no
  oneCCL needed) and each keeps its own partition of the weights and their optimizer state. DeepSpeed is an optional
  extra: its cases run where it is installed (``pip install 'josh-agents[deepspeed]'``). josh's CPU launch leaves
  DeepSpeed's shared-memory all-reduce op (for inference only) uncompiled: no launch loads or builds an op.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Sharding:
    """One sharded launch: its accelerate config, and where a checkpoint keeps each process's share."""

    config: str
    sft_launch: tuple[str, ...]  # launcher flags for the run compared with one process
    pieces: str  # glob of the per-process files in ``checkpoint-N/<folder>``
    folder: str  # ``{step}`` is the checkpoint's step
    expected: tuple[str, ...]
    checkpoint_has_adapter: bool | None  # None: not part of this sharding's contract

    def launcher(self, *extra: str) -> list[str]:
        return ["--config_file", self.config, "--num_processes", "2", *extra, "--main_process_port", str(free_port())]

    def shares(self, run: Path, step: int) -> list[str]:
        return sorted(p.name for p in (run / f"checkpoint-{step}" / self.folder.format(step=step)).glob(self.pieces))


FSDP = Sharding(
    config="training/fsdp.yaml",
    sft_launch=("--mixed_precision", "no"),  # bf16 is the shipped default; full precision compares with one process
    pieces="*.distcp",
    folder="pytorch_model_fsdp_0",
    expected=("__0_0.distcp", "__1_0.distcp"),
    checkpoint_has_adapter=False,  # FSDP, not DDP: the checkpoint is sharded (DDP saves a plain adapter)
)
ZERO3 = Sharding(
    config="training/deepspeed_zero3.yaml",
    sft_launch=(),
    pieces="zero_pp_rank_*_optim_states.pt",
    folder="global_step{step}",
    expected=("zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"),
    checkpoint_has_adapter=None,
)
NO_DEEPSPEED = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="needs josh-agents[deepspeed]")
SHARDINGS = [pytest.param(FSDP, id="fsdp"), pytest.param(ZERO3, id="zero3", marks=NO_DEEPSPEED)]
BUILT_OP = "built successfully"  # DeepSpeed's line for every op it compiled or loaded (the shm op: 40-90 s of g++)


@pytest.fixture(scope="module")
def one_process(tiny_smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The four SFT rows and the run one process trains on them: the reference both shardings compare with."""
    folder = tmp_path_factory.mktemp("one-process")
    rows = four_sft_rows(folder / "sft.jsonl")
    return rows, one_process_run(rows, folder, f"model.name={tiny_smollm2}")


@pytest.mark.slow
@pytest.mark.parametrize("sharding", SHARDINGS)
def test_sft_on_two_cpu_processes_learns_what_one_process_learns(
    sharding: Sharding, tiny_smollm2: Path, one_process: tuple[Path, Path], tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    rows, single = one_process
    run = tmp_path / "sharded"
    base = f"model.name={tiny_smollm2}"
    done = launch(
        sharding.launcher(*sharding.sft_launch), rows, run, *SETTINGS, base, "optim.per_device_train_batch_size=1"
    )
    metrics = finished_run(done, run, steps=2)
    assert BUILT_OP not in done.stdout + done.stderr
    assert metrics["trainer_metrics"]["epoch"] == 1.0, "2 steps x 2 processes x 1 row: every row once"
    assert sharding.shares(run, 2) == list(sharding.expected)
    if sharding.checkpoint_has_adapter is not None:
        assert (run / "checkpoint-2" / "adapter_model.safetensors").exists() == sharding.checkpoint_has_adapter

    assert_same_as_one_process(run, single)
    adapter = load_file(run / "adapter_model.safetensors")
    assert learned_update(adapter) > 0
    loads_for_inference(run, adapter)


@pytest.mark.slow
@pytest.mark.parametrize("sharding", SHARDINGS)
def test_kto_step_with_the_shipped_config(sharding: Sharding, tiny_smollm2: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    rows = four_kto_rows(tmp_path / "kto.jsonl")
    run = tmp_path / "kto"
    done = launch(sharding.launcher(), rows, run, f"model.name={tiny_smollm2}", "max_length=256", "optim.max_steps=1",
                  "optim.gradient_checkpointing=false", method="kto")  # fmt: skip
    metrics = finished_run(done, run, steps=1)
    assert BUILT_OP not in done.stdout + done.stderr
    assert metrics["rows"] == 4 and metrics["trainer_metrics"]["epoch"] == 1.0, "one batch of 2 on each process"
    assert sharding.shares(run, 1) == list(sharding.expected)

    adapter = load_file(run / "adapter_model.safetensors")
    assert learned_update(adapter) > 0
    loads_for_inference(run, adapter)
