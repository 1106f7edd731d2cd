"""The accelerate launch configs (``accelerate_config.yaml``, ``training/*.yaml``) load with accelerate's own loader,
point at files that exist, and the ones that can run on a CPU launch a tiny training job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")

from accelerate.commands.config.config_args import load_config_from_file  # noqa: E402
from accelerate.utils import DistributedType  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted([ROOT / "accelerate_config.yaml", *(ROOT / "training").glob("*.yaml")])
# `--cpu` with one process: nothing to shard, so the sharded configs launch real runs in test_training_fsdp.py and
# test_training_deepspeed.py (two CPU processes) instead
CPU_LAUNCHABLE = {DistributedType.NO, DistributedType.MULTI_GPU}

TINY_JOB = """
import json
import torch
from accelerate import Accelerator

accelerator = Accelerator()
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)
x, y = torch.randn(16, 4), torch.randn(16, 1)
losses = []
for _ in range(5):
    loss = torch.nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.item())
print(json.dumps({"device": str(accelerator.device), "processes": accelerator.num_processes, "losses": losses}))
"""


def test_there_are_configs_for_each_kind_of_launch() -> None:
    kinds = {load_config_from_file(str(path)).distributed_type for path in CONFIGS}
    assert {DistributedType.NO, DistributedType.MULTI_GPU, DistributedType.DEEPSPEED, DistributedType.FSDP} <= kinds


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_loads_and_is_consistent(path: Path) -> None:
    config = load_config_from_file(str(path))
    assert config.compute_environment.value == "LOCAL_MACHINE"
    assert config.num_machines >= 1 and config.num_processes >= config.num_machines
    if config.distributed_type == DistributedType.DEEPSPEED:
        ds_file = ROOT / config.deepspeed_config["deepspeed_config_file"]
        ds = json.loads(ds_file.read_text())
        assert ds["zero_optimization"]["stage"] == 3
        assert ds["train_micro_batch_size_per_gpu"] == "auto", "the trainer, not the file, sets the batch size"
        # accelerate refuses a launch whose config sets mixed_precision beside a deepspeed_config_file
        assert config.mixed_precision is None and ds["bf16"]["enabled"] == "auto", "bf16 follows the recipe"
    else:
        assert config.mixed_precision in {"no", "bf16", "fp16"}
    if config.distributed_type == DistributedType.FSDP:
        assert config.fsdp_config["fsdp_version"] in (1, 2)
        assert config.fsdp_config["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"


def test_a_config_with_an_unknown_key_is_rejected(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "accelerate_config.yaml").read_text() + "\nnum_gpu: 2\n")
    with pytest.raises(ValueError, match="unknown keys"):
        load_config_from_file(str(bad))


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [p for p in CONFIGS if load_config_from_file(str(p)).distributed_type in CPU_LAUNCHABLE],
    ids=lambda p: p.name,
)
def test_config_launches_a_tiny_job_on_cpu(path: Path, tmp_path) -> None:
    script = tmp_path / "tiny_job.py"
    script.write_text(TINY_JOB)
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(path)]
    command += ["--cpu", "--num_processes", "1", str(script)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["device"] == "cpu" and result["processes"] == 1
    assert result["losses"][-1] < result["losses"][0]
