"""``josh train sft|kto|dpo|tree|grpo`` and ``python -m josh.training ...`` (the ``accelerate launch`` entry point).

Heavy imports (torch, transformers, trl) happen inside the commands so ``--help`` stays fast.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from josh.training.launch import process_rank, world_size
from josh.util.errors import reported, skips_bad_lines
from josh.util.plan import PLAN_HELP, print_plan

train_app = typer.Typer(
    help="Fine-tune an agent on extracted SFT / KTO / DPO / tree data, or online with GRPO (LoRA, optional 4-bit, "
    "TRL + accelerate).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def run_command(
    method: str, recipe: Path, overrides: list[str], data: Path | None, output: Path | None, resume: bool, plan: bool
) -> None:
    """Load and check the recipe, train (``plan``: print what training would do instead), and turn every input
    problem into one red line and exit code 2."""
    from josh.training.recipe import RecipeError, load_recipe  # heavy: the training stage
    from josh.training.runner import train  # heavy: the training stage

    console = Console(stderr=True, soft_wrap=True)
    with reported(interrupted="rerun the same command with --resume to continue from the last checkpoint"):
        loaded = load_recipe(recipe, overrides)
        if "method" in loaded.model_fields_set and loaded.method != method:
            raise RecipeError(f"{recipe} is a {loaded.method} recipe; run `josh train {loaded.method}` instead")
        loaded.method = method
        if data is not None:
            loaded.data = data
        if output is not None:
            loaded.output_dir, loaded.run_name = output.parent, output.name
        if plan:
            from josh.training.runner import plan as training_plan  # heavy: the training stage

            lines = training_plan(loaded, resume=resume, processes=world_size())  # every process checks
            return print_plan(f"josh train {method} --plan", lines) if process_rank() == 0 else None
        run_dir = train(loaded, resume=resume, source=str(recipe))
    from accelerate import PartialState  # optional: the train extra

    if PartialState().is_main_process:
        console.print(f"[green]done:[/green] {run_dir}")


METHODS = {
    "sft": "Supervised fine-tuning on whole conversations (loss on assistant tokens only).",
    "kto": "KTO on good/bad agent turns (reference = the policy without its adapter).",
    "dpo": "DPO on chosen/rejected agent turns.",
    "tree": "Advantage-weighted log-likelihood on sibling turns (josh extract --format tree).",
    "grpo": "Online GRPO on whole conversations with a user simulator, rewarded by the environment (recipe: grpo).",
}
ONLINE = ("grpo",)  # rolls out its own conversations: no --data


def _command(method: str) -> Callable[..., None]:
    """The ``josh train METHOD`` command: the same options for every method (an online one takes no data file)."""

    def command(
        recipe: Path = typer.Option(..., "--recipe", "-r", help=f"recipe YAML, e.g. recipes/tiny-{method}.yaml"),
        overrides: list[str] = typer.Option(
            None, "--set", help="override a recipe key, e.g. --set optim.learning_rate=1e-4 (repeatable)"
        ),
        data: Annotated[
            Path | None, typer.Option("--data", help="training JSONL (overrides the recipe's data)")
        ] = None,
        output: Path = typer.Option(
            None, "--output", "-o", help="run folder (default: <output_dir>/<run_name> from the recipe)"
        ),
        resume: bool = typer.Option(False, "--resume", help="continue from the last checkpoint-N in the run folder"),
        plan: bool = typer.Option(False, "--plan", help=PLAN_HELP),
    ) -> None:
        run_command(method, recipe, overrides or [], data, output, resume, plan)

    command.__doc__ = METHODS[method]
    if method in ONLINE:
        signature = inspect.signature(command)
        params = [p for p in signature.parameters.values() if p.name != "data"]
        command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return command


for _method in METHODS:
    train_app.command(_method)(skips_bad_lines(_command(_method)))
