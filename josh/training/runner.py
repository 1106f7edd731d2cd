"""Run one fine-tune end to end and lay out ``checkpoints/<run>/``.

The run folder holds the adapter (or full weights), the tokenizer with the template it was trained with, the
resolved ``recipe.yaml``, ``metrics.json`` (loss curve, tokens, runtime, tokens/s), a model card (``README.md``),
``train.log`` (the trainer's log dicts and every library warning or progress bar of the run) and the trainer's
``checkpoint-N/`` folders that ``--resume`` continues from. Every input is checked before a model is loaded.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from josh.training import data as data_mod
from josh.training.config import (
    check_liger_kernel,
    check_report_to,
    check_trainer_packages,
    optimizer_steps,
    with_min_steps,
)
from josh.training.launch import process_state
from josh.training.memory import lean_loss_head
from josh.training.model import load_model, load_tokenizer, model_path
from josh.training.recipe import RecipeError, TrainRecipe
from josh.training.reporting import quiet_trainer, write_model_card
from josh.util.atomic import write_atomic
from josh.util.layout import METRICS, TRAIN_LOG, TRAIN_RECIPE
from josh.util.quiet import noise_to


class RunExistsError(FileExistsError):
    """The run folder already holds a trained run and ``--resume`` was not given."""


def last_checkpoint(run_dir: Path) -> Path | None:
    """The ``checkpoint-N`` folder with the highest N, if any."""
    steps = [
        (int(p.name.split("-", 1)[1]), p)
        for p in run_dir.glob("checkpoint-*")
        if p.is_dir() and p.name.split("-", 1)[1].isdigit()
    ]
    return max(steps)[1] if steps else None


TRAINERS = {"grpo": "josh.training.grpo.trainer"}  # the other methods: josh.training.<method>


def _trainer_module(method: str) -> Any:
    return importlib.import_module(TRAINERS.get(method, f"josh.training.{method}"))


def _portable_base(name: str) -> str:
    """What an adapter should name as its base: an absolute folder, or the alias / hub id as given."""
    path = Path(name).expanduser()
    return str(path.resolve()) if path.is_dir() else name


def _metrics_callback() -> Any:
    from transformers import TrainerCallback  # optional: the train extra

    class MetricsCallback(TrainerCallback):
        """Collects every log line and the tokens seen during this session."""

        def __init__(self) -> None:
            self.history: list[dict[str, Any]] = []
            self.tokens_at_start = 0
            self.started = 0.0

        def on_train_begin(self, args, state, control, **kwargs):
            self.tokens_at_start = state.num_input_tokens_seen
            self.started = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                self.history.append({"step": state.global_step, **logs})

    return MetricsCallback()


def prepare(recipe: TrainRecipe, *, resume: bool) -> tuple[list[dict[str, Any]], Any, Path | None]:
    """Everything that can fail cheaply: data, method checks, tokenizer, lengths, the run folder."""
    check_report_to(recipe.report_to)
    check_liger_kernel(recipe.optim.use_liger_kernel)
    if recipe.method == "grpo":
        rows, tokenizer = _trainer_module("grpo").prepare_tasks(recipe)
    else:
        rows, tokenizer = _prepare_rows(recipe)
    run_dir = recipe.run_dir
    checkpoint = last_checkpoint(run_dir) if run_dir.is_dir() else None
    if resume and checkpoint is None:
        raise RunExistsError(f"--resume: no checkpoint-N folder in {run_dir} to resume from")
    if not resume and (checkpoint is not None or (run_dir / METRICS).exists()):
        raise RunExistsError(f"{run_dir} already holds a run: pass --resume, or choose another --output / run_name")
    return rows, tokenizer, checkpoint


def _prepare_rows(recipe: TrainRecipe) -> tuple[list[dict[str, Any]], Any]:
    """Read, check and length-filter the rows of a file-based method; the tokenizer with its training template."""
    if recipe.data is None:
        raise RecipeError("no training data: set data in the recipe or pass --data PATH")
    rows = data_mod.read_rows(recipe.data, recipe.method)
    if recipe.method == "kto":
        _trainer_module("kto").validate(recipe, rows)
    if recipe.method == "tree":
        rows, zero = _trainer_module("tree").weighted_rows(recipe, rows)
        if zero:
            print(f"skipped {zero} row(s) whose advantage weight is 0 (nothing to learn from them)")
    masks = recipe.method == "tree" or (recipe.method == "sft" and recipe.sft.assistant_only_loss)
    tokenizer = load_tokenizer(recipe, need_masks=masks)
    rows, dropped = data_mod.drop_overlong(
        rows, lambda r: data_mod.rendered_length(tokenizer, r, recipe.method), recipe.max_length, recipe.data
    )
    if dropped:
        print(f"skipped {dropped} row(s) longer than max_length={recipe.max_length} tokens (never truncated)")
    if recipe.method == "kto":
        _trainer_module("kto").validate(recipe, rows)
        data_mod.check_kto_labels(rows, recipe.data)
    return rows, tokenizer


def plan(recipe: TrainRecipe, *, resume: bool = False, processes: int = 1) -> dict[str, str]:
    """What ``train`` would do, checked as it checks before loading a model (the model installed, the trainer's
    packages, the data, the lengths, the run folder) and nothing trained or written: each line of the plan."""
    check_trainer_packages([recipe])
    model = model_path(recipe.model.name)
    rows, _, checkpoint = prepare(recipe, resume=resume)
    lines = {"method": recipe.method, "model": str(model)}
    if recipe.model.adapter:
        lines["continues adapter"] = recipe.model.adapter
    if recipe.method != "grpo":
        sized = with_min_steps(recipe, len(rows), processes)
        opt = sized.optim
        batch = opt.per_device_train_batch_size * opt.gradient_accumulation_steps * processes
        lines["data"] = f"{recipe.data}: {len(rows)} rows within max_length {recipe.max_length}"
        lines["effective batch"] = (
            f"{batch} rows = {opt.per_device_train_batch_size} per device x {opt.gradient_accumulation_steps} accumulation "
            f"x {processes} process(es)"
        )
        steps = opt.max_steps if opt.max_steps > 0 else optimizer_steps(sized, len(rows), processes)
        lines["optimizer steps"] = str(steps)
    else:
        lines["tasks"] = f"{len(rows)} {recipe.grpo.split} tasks of {recipe.grpo.env}/{recipe.grpo.data}"
    lines["writes"] = str(recipe.run_dir) + (f" (resumes {checkpoint.name})" if checkpoint else "")
    return lines


def train(recipe: TrainRecipe, *, resume: bool = False, source: str | None = None, progress: bool = True) -> Path:
    """Train per ``recipe`` and return the run folder; ``source`` (the recipe file) goes into the model card.

    The terminal shows one progress bar; library warnings and progress bars go to ``train.log``."""
    state = process_state()
    with state.main_process_first():  # the first use of `smollm2` converts it once, in the main process
        model_path(recipe.model.name)
    rows, tokenizer, checkpoint = prepare(recipe, resume=resume)
    recipe = with_min_steps(recipe, len(rows), state.num_processes)
    run_dir = recipe.run_dir
    main = state.is_main_process
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / TRAIN_RECIPE, recipe.to_yaml())
    callback = _metrics_callback()
    # Library prints (transformers announces WANDB_MODE=offline on standard output) join the rest of the noise.
    with noise_to(run_dir / TRAIN_LOG), redirect_stdout(sys.stderr):
        trainer = _trainer_module(recipe.method).build_trainer(
            recipe, rows, load_model(recipe), tokenizer, run_dir, [callback]
        )
        quiet_trainer(trainer, run_dir / TRAIN_LOG, progress=progress)
        with lean_loss_head():
            result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        gather_for_final_save(trainer)
        trainer.save_model(str(run_dir))
    if main:
        metrics = _finish(recipe, run_dir, trainer, result, callback, len(rows), checkpoint)
        write_model_card(run_dir, recipe, metrics, source)
    return run_dir


def gather_for_final_save(trainer: Any) -> None:
    """Under FSDP with a sharded state dict (``training/fsdp.yaml``) ``save_model`` writes nothing into the run
    folder: gather the full state dict for the final save, so the main process writes one adapter as without FSDP.
    The ``checkpoint-N`` folders keep their sharded state, which is what ``--resume`` reads."""
    if getattr(trainer, "is_fsdp_enabled", False):
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")


def _finish(
    recipe: TrainRecipe, run_dir: Path, trainer: Any, result: Any, callback: Any, rows: int, checkpoint: Path | None
) -> dict[str, Any]:
    adapter_config = run_dir / "adapter_config.json"
    if adapter_config.is_file():
        config = json.loads(adapter_config.read_text())
        config["base_model_name_or_path"] = _portable_base(recipe.model.name)
        write_atomic(adapter_config, json.dumps(config, indent=2))
    runtime = time.perf_counter() - callback.started
    tokens = trainer.state.num_input_tokens_seen - callback.tokens_at_start
    metrics = {
        "method": recipe.method,
        "rows": rows,
        "global_step": trainer.state.global_step,
        "resumed_from": checkpoint.name if checkpoint else None,
        "train_loss": result.training_loss,
        "train_runtime_s": runtime,
        "tokens": tokens,
        "tokens_per_second": tokens / runtime if runtime > 0 else None,
        "trainer_metrics": result.metrics,
        "loss_curve": callback.history,
    }
    rollouts = getattr(trainer, "josh_rollouts", None)  # GRPO: the conversations it rolled out and skipped
    if rollouts is not None:
        metrics["rollouts"] = rollouts.model_dump()
        print(rollouts.line())
    write_atomic(run_dir / METRICS, json.dumps(metrics, indent=2))
    return metrics
