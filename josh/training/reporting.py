"""What a training run shows and leaves behind besides weights: one progress bar (or a line every 30 s when
output is not a terminal) instead of the trainer's raw dict logs, those logs as JSON lines in ``train.log``, and
a model card (``README.md``) that names the base model, the data, the recipe and the code that trained it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from josh.run.info import run_info
from josh.training.recipe import TrainRecipe
from josh.util.atomic import write_atomic
from josh.util.progress import stage_progress


def progress_callback(log_path: Path, *, enabled: bool = True) -> Any:
    """A ``TrainerCallback`` that replaces transformers' ``ProgressCallback``: a bar with the latest loss on the
    terminal, every log dict appended to ``log_path`` as one JSON line."""
    from transformers import TrainerCallback  # optional: the train extra

    class TrainProgress(TrainerCallback):
        def __init__(self) -> None:
            self.progress: Any = None
            self.bar: Any = None

        def on_train_begin(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            self.progress = stage_progress(
                TextColumn("train"), BarColumn(), MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"),
                TimeElapsedColumn(), TimeRemainingColumn(), enabled=enabled,
            )  # fmt: skip
            self.progress.start()
            self.bar = self.progress.add_task(
                "train step", total=state.max_steps, completed=state.global_step, loss="-"
            )

        def on_step_end(self, args, state, control, **kwargs):
            if self.progress is not None:
                self.progress.update(self.bar, completed=state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            with log_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"step": state.global_step, **logs}, default=str) + "\n")
            if self.progress is not None and "loss" in logs:
                self.progress.update(self.bar, loss=f"{float(logs['loss']):.4f}")

        def on_train_end(self, args, state, control, **kwargs):
            if self.progress is not None:
                self.progress.stop()
                self.progress = None

    return TrainProgress()


def quiet_trainer(trainer: Any, log_path: Path, *, progress: bool = True) -> None:
    """Swap the trainer's tqdm bar and raw dict printing for ``progress_callback``."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback  # optional: the train extra

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(progress_callback(log_path, enabled=progress))


def write_model_card(run_dir: Path, recipe: TrainRecipe, metrics: dict[str, Any], source: str | None) -> Path:
    """``run_dir/README.md``: what was trained, on what, how, and how to use it (replaces the generated card)."""
    info = run_info(recipe=source)
    base = recipe.model.name
    kind = "LoRA adapter" if recipe.lora.enabled else "fine-tune"
    continued = f" (continuing the adapter `{recipe.model.adapter}`)" if recipe.model.adapter else ""
    loss, steps = metrics.get("train_loss"), metrics.get("global_step")
    loss_text = f", final training loss {loss:.4f}" if isinstance(loss, float) else ""
    commit = f", commit {info.git_commit}" if info.git_commit else ""
    lines = [
        "---",
        f"base_model: {base}",
        f"library_name: {'peft' if recipe.lora.enabled else 'transformers'}",
        f"tags: [josh, {recipe.method}, trl]",
        "---",
        "",
        f"# {recipe.resolved_run_name}",
        "",
        f"A {kind} of `{base}` trained by josh ({recipe.method.upper()} with TRL) on tool-calling dialogues.",
        "",
        f"- base model: `{base}`{continued}",
        _data_line(recipe, metrics),
        "- recipe: `recipe.yaml` in this folder" + (f", from `{source}`" if source else ""),
        f"- training: {steps} optimizer step{'' if steps == 1 else 's'}{loss_text}; the loss curve is in "
        "`metrics.json`, the trainer's logs in `train.log`",
        f"- josh {info.josh_version}{commit}",
        "",
        "Evaluate it with the agent whose format the data has (the adapter is loaded on its base):",
        "",
        "```bash",
        f"josh eval --backend hf --model {run_dir} --agent <react|act|function_calling> --out runs/<name>",
        "```",
        "",
    ]
    card = run_dir / "README.md"
    write_atomic(card, "\n".join(lines))
    return card


def _data_line(recipe: TrainRecipe, metrics: dict[str, Any]) -> str:
    if recipe.method == "grpo":
        g = recipe.grpo
        return (
            f"- data: online rollouts on {metrics.get('rows', '?')} {g.env} {g.split} tasks ({g.agent} agent, {g.user} "
            f"user); conversations longer than max_length={recipe.max_length} tokens are skipped, never truncated"
        )
    return (
        f"- data: `{recipe.data}`, {metrics.get('rows', '?')} rows used (rows longer than max_length="
        f"{recipe.max_length} tokens are skipped, never truncated)"
    )
