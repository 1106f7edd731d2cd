"""Which process of a training launch this is: one process, or one rank of a data-parallel ``accelerate launch``.

``accelerate launch`` starts several processes (through torchrun) only for GPU-type configs such as
``training/multi_gpu.yaml``; on a machine without a GPU those processes find no device to join a process group on,
so each would train alone on all the data and write the same run folder. ``process_state`` puts them on the CPU
with the gloo backend instead, which is also what TrainingArguments then picks up (``ACCELERATE_USE_CPU``), so
gradients are averaged across processes as on GPUs. ``accelerate launch --cpu`` with ``--num_processes N > 1``
starts one process only (accelerate's CPU launcher needs mpirun for more); that launch stops with an error
naming the config that works.

The sharded launches run on CPU processes too. accelerate pairs FSDP (``training/fsdp.yaml``) only with GPU-type
process groups, so on CPU it would quietly train plain DDP: ``process_state`` builds the FSDP state itself. With
DeepSpeed (``training/deepspeed_zero3.yaml``) accelerate finds no backend to name and counts one process while
DeepSpeed's group holds them all: ``process_state`` names gloo, the backend DeepSpeed's CPU accelerator uses
without oneCCL. In both cases the trainer keeps that state (``uses_configured_state``) instead of starting anew.
DeepSpeed's CPU accelerator would also compile a shared-memory all-reduce op with g++ when its process group starts
(40 to 90 s on 2 cores, again for every new Python environment); only DeepSpeed's inference all-reduce uses it, and
training's collectives go through gloo, so a CPU launch marks the op unavailable and nothing is compiled.
"""

from __future__ import annotations

import os
from typing import Any

CPU_DDP_CONFIG = "training/cpu_ddp.yaml"


class LaunchError(ValueError):
    """The launch would not run the processes it was asked for."""


def world_size() -> int:
    """How many processes the launcher started (1 outside a distributed launch)."""
    return _launch_variable(("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"), 1)


def process_rank() -> int:
    """This process's rank in a distributed launch (0 outside one)."""
    return _launch_variable(("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK"), 0)


def _launch_variable(names: tuple[str, ...], default: int) -> int:
    """The first of ``names`` (torchrun's, MPICH's, Open MPI's) set to a whole number in the environment."""
    for name in names:
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return default


def check_cpu_launch() -> None:
    """Refuse ``accelerate launch --cpu --num_processes N`` (N > 1), which silently starts a single process."""
    cpu_flag = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")
    if cpu_flag and os.environ.get("MASTER_ADDR") and world_size() == 1:
        raise LaunchError(
            "accelerate launch --cpu started 1 process, not the --num_processes asked for (its CPU launcher needs "
            f"mpirun for more): for data-parallel CPU processes use --config_file {CPU_DDP_CONFIG} "
            "--num_processes N, without --cpu"
        )


def process_state() -> Any:
    """accelerate's ``PartialState`` for this process; the processes of a launch without a GPU use CPU + gloo, with
    FSDP or DeepSpeed when the launch config asks for them."""
    check_cpu_launch()  # before accelerate's import (torch): a refused launch stops in a second
    from accelerate import PartialState  # optional: the train extra
    from accelerate.utils import DistributedType  # optional: the train extra

    if world_size() > 1 and os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        _no_deepspeed_shm_op()
    state = PartialState()
    if world_size() > 1 and state.backend is None:  # no GPU-type device: no backend, and a count of 1 process
        deepspeed = state.distributed_type == DistributedType.DEEPSPEED
        PartialState._reset_state()
        if deepspeed:
            return PartialState(backend="gloo")  # not cpu=True, with which accelerate leaves DeepSpeed out
        os.environ["ACCELERATE_USE_CPU"] = "true"
        state = PartialState(cpu=True)
        if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
            _cpu_fsdp_state()
    return state


def _no_deepspeed_shm_op() -> None:
    """On DeepSpeed's CPU accelerator, mark its shared-memory all-reduce op unavailable before the process group
    starts (see the module docstring): DeepSpeed then leaves it unbuilt and reduces through gloo."""
    import deepspeed.ops  # optional: the deepspeed extra
    from deepspeed.accelerator import get_accelerator  # optional: the deepspeed extra

    if get_accelerator().device_name() == "cpu":
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def _cpu_fsdp_state() -> None:
    """Make the CPU processes' accelerator state an FSDP one, from the launcher's ``FSDP_*`` variables, as
    accelerate's ``AcceleratorState`` does for GPU processes (where the trainer's accelerator builds it)."""
    from accelerate.state import AcceleratorState, PartialState  # optional: the train extra
    from accelerate.utils import (  # optional: the train extra
        DistributedType,
        FullyShardedDataParallelPlugin,
        TorchDynamoPlugin,
    )

    state = AcceleratorState(cpu=True, dynamo_plugin=TorchDynamoPlugin(), _from_accelerator=True)
    plugin = FullyShardedDataParallelPlugin()
    if state.mixed_precision != "no":
        plugin.set_mixed_precision(state.mixed_precision)
    state.fsdp_plugin = plugin
    state.distributed_type = PartialState().distributed_type = DistributedType.FSDP


def uses_configured_state() -> bool:
    """Whether ``process_state`` set up a sharded launch on CPU processes, which the trainer must keep rather than
    start a new state (``TrainingArguments(accelerator_config={"use_configured_state": True})``)."""
    from accelerate import PartialState  # optional: the train extra
    from accelerate.utils import DistributedType  # optional: the train extra

    shared = PartialState._shared_state
    return shared.get("backend") == "gloo" and shared.get("distributed_type") in (
        DistributedType.FSDP,
        DistributedType.DEEPSPEED,
    )
