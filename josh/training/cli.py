"""``josh train sft|kto|dpo|tree|grpo`` and ``python -m josh.training ...`` (the ``accelerate launch`` entry point).

Heavy imports (torch, transformers, trl) happen inside the commands so ``--help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from josh.cli_errors import reported

train_app = typer.Typer(
    help="Fine-tune an agent on extracted SFT / KTO / DPO / tree data, or online with GRPO (LoRA, optional 4-bit, "
    "TRL + accelerate).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def _recipe_option(method: str) -> typer.models.OptionInfo:
    return typer.Option(..., "--recipe", "-r", help=f"recipe YAML, e.g. recipes/tiny-{method}.yaml")


SetOpt = typer.Option(None, "--set", help="override a recipe key, e.g. --set optim.learning_rate=1e-4 (repeatable)")
DataOpt = typer.Option(None, "--data", help="training JSONL (overrides the recipe's data)")
OutputOpt = typer.Option(None, "--output", "-o", help="run folder (default: <output_dir>/<run_name> from the recipe)")
ResumeOpt = typer.Option(False, "--resume", help="continue from the last checkpoint-N in the run folder")


def run_command(method: str, recipe: Path, overrides: list[str], data: Path | None, output: Path | None, resume: bool):
    """Load and check the recipe, train, and turn every input problem into one red line and exit code 2."""
    from rich.console import Console

    from josh.recipes import RecipeError, load_recipe
    from josh.training.runner import train

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
        run_dir = train(loaded, resume=resume, source=str(recipe))
    console.print(f"[green]done:[/green] {run_dir}")


@train_app.command()
def sft(
    recipe: Path = _recipe_option("sft"),
    overrides: list[str] = SetOpt,
    data: Path = DataOpt,
    output: Path = OutputOpt,
    resume: bool = ResumeOpt,
) -> None:
    """Supervised fine-tuning on whole conversations (loss on assistant tokens only)."""
    run_command("sft", recipe, overrides or [], data, output, resume)


@train_app.command()
def kto(
    recipe: Path = _recipe_option("kto"),
    overrides: list[str] = SetOpt,
    data: Path = DataOpt,
    output: Path = OutputOpt,
    resume: bool = ResumeOpt,
) -> None:
    """KTO on good/bad agent turns (reference = the policy without its adapter)."""
    run_command("kto", recipe, overrides or [], data, output, resume)


@train_app.command()
def dpo(
    recipe: Path = _recipe_option("dpo"),
    overrides: list[str] = SetOpt,
    data: Path = DataOpt,
    output: Path = OutputOpt,
    resume: bool = ResumeOpt,
) -> None:
    """DPO on chosen/rejected agent turns."""
    run_command("dpo", recipe, overrides or [], data, output, resume)


@train_app.command()
def tree(
    recipe: Path = _recipe_option("tree"),
    overrides: list[str] = SetOpt,
    data: Path = DataOpt,
    output: Path = OutputOpt,
    resume: bool = ResumeOpt,
) -> None:
    """Advantage-weighted log-likelihood on sibling turns (josh extract --format tree)."""
    run_command("tree", recipe, overrides or [], data, output, resume)


@train_app.command()
def grpo(
    recipe: Path = _recipe_option("grpo"),
    overrides: list[str] = SetOpt,
    output: Path = OutputOpt,
    resume: bool = ResumeOpt,
) -> None:
    """Online GRPO on whole conversations with a user simulator, rewarded by the environment (recipe: grpo)."""
    run_command("grpo", recipe, overrides or [], None, output, resume)
