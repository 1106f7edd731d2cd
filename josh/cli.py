"""The ``josh`` command. Each command is a thin wrapper; the work lives in the stage modules (imported lazily
so ``josh --help`` stays fast)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="josh",
    help="Self-train tool-calling dialogue agents from sparse rewards (JOSH).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def main() -> None:
    """JOSH: rollouts with turn-level beam search, SFT/KTO/DPO data, LoRA training, evaluation."""


@app.command()
def version() -> None:
    """Print the installed josh version."""
    from josh import __version__

    typer.echo(__version__)


if __name__ == "__main__":
    app()
