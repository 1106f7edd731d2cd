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


@app.command()
def rollout(
    out: str = typer.Option(..., "--out", help="run folder: trees.jsonl and stats.json go here (rerun to resume)"),
    env: str = typer.Option("toolwoz", help="environment: toolwoz or retail"),
    data: str = typer.Option("mini", help="data source: 'mini' or a folder (see `josh data`)"),
    split: str = typer.Option("train", help="task split"),
    agent: str = typer.Option("react", help="agent strategy: react, function_calling, act"),
    backend: str = typer.Option("hf", help="agent LLM backend: hf, vllm, openai"),
    model: str = typer.Option("smollm2", help="agent model: hub id, local folder, adapter folder, or smollm2"),
    user: str = typer.Option("goal", help="user simulator kind"),
    user_backend: str | None = typer.Option(None, help="user LLM backend (default: the agent's)"),
    user_model: str | None = typer.Option(None, help="user LLM model (default: the agent's; same pair = shared)"),
    beam: int = typer.Option(8, min=1, help="most live leaves per task"),
    branching: int = typer.Option(2, min=1, help="agent turns sampled per leaf while the beam has room"),
    max_depth: int = typer.Option(15, min=1, help="most agent turns per conversation"),
    limit: int | None = typer.Option(None, min=1, help="only the first N tasks of the split"),
    concurrency: int = typer.Option(16, min=1, help="tasks searched at the same time"),
    progress: bool = typer.Option(True, help="show the progress bar"),
) -> None:
    """JOSH beam search over a task split; one tree per task streamed to OUT/trees.jsonl (resumable)."""
    from josh.rollout import RolloutConfig, RolloutOptions, rollout_from_options
    from josh.search import SearchConfig

    try:
        options = RolloutOptions(
            out=out,
            env=env,
            data=data,
            split=split,
            agent=agent,
            backend=backend,
            model=model,
            user=user,
            user_backend=user_backend,
            user_model=user_model,
            limit=limit,
            rollout=RolloutConfig(
                search=SearchConfig(max_beam=beam, branching=branching, max_depth=max_depth), concurrency=concurrency
            ),
        )
        stats = rollout_from_options(options, progress=progress)
    except (ValueError, OSError) as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from exc
    typer.echo(
        f"{stats.tasks} tasks ({stats.skipped_finished} already done), {stats.success} reached 100%, "
        f"mean reward {stats.mean_reward:.3f}, {stats.llm_calls} LLM calls, "
        f"{stats.prompt_tokens + stats.completion_tokens} tokens -> {out}"
    )


@app.command()
def extract(
    run: str = typer.Argument(..., help="rollout run folder (or its trees.jsonl)"),
    out: str | None = typer.Option(None, help="output folder (default: the run folder)"),
    min_reward: float = typer.Option(1.0, min=0.0, max=1.0, help="skip trees below this reward"),
    keep_errors: bool = typer.Option(False, help="keep ideal paths that contain tool or format errors"),
    tokenizer: str | None = typer.Option(None, help="count tokens with this HF tokenizer (default: whitespace)"),
) -> None:
    """Turn rollout trees into sft.jsonl, kto.jsonl and dpo.jsonl (TRL conversational formats)."""
    from josh.extract import ExtractConfig, extract_run

    try:
        config = ExtractConfig(min_reward=min_reward, drop_errors=[] if keep_errors else ExtractConfig().drop_errors)
        stats, out_dir = extract_run(run, out, config, tokenizer=tokenizer)
    except (ValueError, OSError) as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from exc
    typer.echo(
        f"{stats.accepted}/{stats.trees} trees used: {stats.sft} SFT, {stats.kto_desirable} good + "
        f"{stats.kto_undesirable} bad KTO, {stats.dpo} DPO rows -> {out_dir}"
    )


def _register_data() -> None:
    from josh.envs.retail.commands import download_retail_command
    from josh.envs.toolwoz.commands import data_app

    data_app.command("download-retail")(download_retail_command)
    app.add_typer(data_app, name="data")


_register_data()


def _register_train() -> None:
    from josh.training.cli import train_app

    app.add_typer(train_app, name="train")


_register_train()


if __name__ == "__main__":
    app()
