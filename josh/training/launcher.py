"""A training run started as users start one on several GPUs: ``accelerate launch`` of ``python -m josh.training``
in a child process, with an accelerate config (DDP, DeepSpeed, FSDP) and a number of processes.

``LaunchSpec`` is the loop recipe's ``launch`` section; ``LaunchedTrainer`` takes a training recipe and trains it
through that launch: the recipe is written to a temporary file, the launch's output goes to ``launch.log`` in the run
folder, and the run folder comes out as the in-process trainer leaves it (``--resume`` continues from its last
checkpoint). The recipe and its rows are checked in this process first (``josh.training.runner.prepare``), so a
recipe that cannot be trained on raises ``RecipeError`` or ``DatasetError`` before any launch, as the in-process
trainer does; a launch that fails raises ``LaunchFailedError`` with the command's error line.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import Field

from josh.training.recipe import RecipeError, TrainRecipe
from josh.training.runner import prepare
from josh.util.layout import LAUNCH_LOG
from josh.util.strict import StrictModel


class LaunchFailedError(RuntimeError):
    """The launched training failed for another reason than its input."""


class LaunchSpec(StrictModel):
    """Train every stage through ``accelerate launch --config_file CONFIG --num_processes PROCESSES``."""

    config: Path = Field(..., description="accelerate config, e.g. training/multi_gpu.yaml or training/fsdp.yaml")
    processes: int = Field(1, ge=1, description="--num_processes: processes (GPUs) of the launch")
    options: list[str] = Field(
        default_factory=list, description="further accelerate launch options, e.g. [--num_machines, '2']"
    )

    def check(self) -> None:
        """Fail in one line when the launch cannot start: a missing config file or accelerate not installed."""
        if not self.config.is_file():
            raise RecipeError(f"launch.config: {self.config} is not a file; the configs are in training/")
        if importlib.util.find_spec("accelerate") is None:
            raise ImportError("launch needs accelerate, which is not installed: pip install 'josh-agents[train]'")

    def command(self, recipe: Path, output: Path, method: str, resume: bool) -> list[str]:
        """The ``accelerate launch`` command line that trains ``recipe`` into ``output``."""
        launcher = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(self.config)]
        launcher += ["--num_processes", str(self.processes)]
        if self.processes > 1 and "--main_process_port" not in self.options:
            launcher += ["--main_process_port", str(_free_port())]  # two loops on one node never collide
        command = [*launcher, *self.options, "-m", "josh.training", method, "--recipe", str(recipe)]
        return [*command, "--output", str(output), *(["--resume"] if resume else [])]


class LaunchedTrainer:
    """A loop trainer (``josh.loop.stages.Trainer``) that trains through ``accelerate launch``; see the module
    docstring."""

    def __init__(self, spec: LaunchSpec) -> None:
        self.spec = spec

    def __call__(self, recipe: TrainRecipe, resume: bool) -> Path:
        prepare(recipe, resume=resume)
        run_dir = recipe.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="josh-launch-") as tmp:
            file = Path(tmp) / "recipe.yaml"
            file.write_text(recipe.to_yaml(), encoding="utf-8")
            command = self.spec.command(file, run_dir, recipe.method, resume)
            with (run_dir / LAUNCH_LOG).open("a", encoding="utf-8") as log:
                log.write("$ " + " ".join(command) + "\n")
                log.flush()
                code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
        if code == 0:
            return run_dir
        reason = _error_line(run_dir / LAUNCH_LOG)
        raise LaunchFailedError(f"accelerate launch exited with code {code}: {reason} (see {run_dir / LAUNCH_LOG})")


def _error_line(log: Path) -> str:
    """The launched command's ``error:`` line (``josh.util.errors``), else torchrun's exit code of the process that
    failed first (-9: killed, often for memory), else the log's last line."""
    lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines()]
    lines = [line for line in lines if line.strip("=-* ")]
    errors = [line for line in lines if line.startswith("error: ")]
    exits = [" ".join(line.split()) for line in lines if line.startswith("exitcode")]
    return (errors or exits[:1] or lines or ["no output"])[-1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
