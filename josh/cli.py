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


ENV = typer.Option("toolwoz", help="environment: toolwoz or retail")
DATA = typer.Option("mini", help="data source: 'mini' or a folder (see `josh data`)")
AGENT = typer.Option("react", help="agent: react, function_calling, act (LLM) or oracle, replay (scripted)")
BACKEND = typer.Option("hf", help="agent LLM backend: hf, vllm, openai, scripted")
MODEL = typer.Option("smollm2", help="agent model: hub id, local folder, checkpoint/adapter folder, or smollm2")
USER = typer.Option(
    "agenda", help="user simulator: agenda, scripted, retail_scripted (rule-based) or goal, guide, instruction (LLM)"
)
USER_BACKEND = typer.Option(None, help="user LLM backend (default: the agent's)")
USER_MODEL = typer.Option(None, help="user LLM model (default: the agent's; the same pair shares one backend)")
LIMIT = typer.Option(None, min=1, help="only the first N tasks of the split")
TEMPERATURE = typer.Option(None, min=0.0, help="agent sampling temperature (default: the agent's)")
MAX_NEW_TOKENS = typer.Option(None, min=1, help="agent max new tokens per generation (default: the agent's)")


def _components(**names: object) -> object:
    """ComponentOptions from CLI values; temperature / max_new_tokens become the agent's sampling."""
    from josh.components import ComponentOptions
    from josh.llm.base import Sampling

    temperature, max_new = names.pop("temperature"), names.pop("max_new_tokens")
    sampling = None
    if temperature is not None or max_new is not None:
        defaults = Sampling()
        sampling = Sampling(
            temperature=defaults.temperature if temperature is None else temperature,
            max_new_tokens=defaults.max_new_tokens if max_new is None else max_new,
        )
    return ComponentOptions(**names, agent_sampling=sampling)


def _fail(exc: Exception) -> typer.Exit:
    typer.secho(f"error: {exc}", fg="red", err=True)
    return typer.Exit(2)


@app.command()
def rollout(
    out: str = typer.Option(..., "--out", help="run folder: trees.jsonl and stats.json go here (rerun to resume)"),
    env: str = ENV,
    data: str = DATA,
    split: str = typer.Option("train", help="task split"),
    agent: str = AGENT,
    backend: str = BACKEND,
    model: str = MODEL,
    user: str = USER,
    user_backend: str | None = USER_BACKEND,
    user_model: str | None = USER_MODEL,
    temperature: float | None = TEMPERATURE,
    max_new_tokens: int | None = MAX_NEW_TOKENS,
    beam: int = typer.Option(8, min=1, help="most live leaves per task"),
    branching: int = typer.Option(2, min=1, help="agent turns sampled per leaf while the beam has room"),
    max_depth: int = typer.Option(15, min=1, help="most agent turns per conversation"),
    limit: int | None = LIMIT,
    concurrency: int = typer.Option(16, min=1, help="tasks searched at the same time"),
    progress: bool = typer.Option(True, help="show the progress bar"),
) -> None:
    """JOSH beam search over a task split; one tree per task streamed to OUT/trees.jsonl (resumable)."""
    from josh.rollout import RolloutConfig, RolloutOptions, rollout_from_options
    from josh.search import SearchConfig

    try:
        components = _components(
            env=env, data=data, split=split, agent=agent, backend=backend, model=model, user=user,
            user_backend=user_backend, user_model=user_model, limit=limit,
            temperature=temperature, max_new_tokens=max_new_tokens,
        )  # fmt: skip
        search = SearchConfig(max_beam=beam, branching=branching, max_depth=max_depth)
        options = RolloutOptions(
            out=out, components=components, rollout=RolloutConfig(search=search, concurrency=concurrency)
        )
        stats = rollout_from_options(options, progress=progress)
    except (ValueError, OSError) as exc:
        raise _fail(exc) from exc
    typer.echo(
        f"{stats.tasks} tasks ({stats.skipped_finished} already done), {stats.success} reached 100%, "
        f"mean reward {stats.mean_reward:.3f}, {stats.llm_calls} LLM calls, "
        f"{stats.prompt_tokens + stats.completion_tokens} tokens -> {out}"
    )


@app.command("eval")
def eval_(
    out: str = typer.Option(..., "--out", help="run folder: results.jsonl and summary.json (rerun to resume)"),
    env: str = ENV,
    data: str = DATA,
    split: str = typer.Option("test", help="task split"),
    agent: str = AGENT,
    backend: str = BACKEND,
    model: str = MODEL,
    user: str = USER,
    user_backend: str | None = USER_BACKEND,
    user_model: str | None = USER_MODEL,
    temperature: float | None = TEMPERATURE,
    max_new_tokens: int | None = MAX_NEW_TOKENS,
    trials: int = typer.Option(1, min=1, help="conversations per task (pass^k for k = 1..trials)"),
    max_turns: int = typer.Option(15, min=1, help="most agent turns per conversation"),
    limit: int | None = LIMIT,
    concurrency: int = typer.Option(16, min=1, help="conversations in flight at the same time"),
    progress: bool = typer.Option(True, help="show the progress bar"),
) -> None:
    """Evaluate an agent (no search) on a split: average reward, 100% success, pass^k, error shares, cost."""
    import asyncio

    from josh.components import build_components
    from josh.evaluate import evaluate
    from josh.report import print_summary

    try:
        options = _components(
            env=env, data=data, split=split, agent=agent, backend=backend, model=model, user=user,
            user_backend=user_backend, user_model=user_model, limit=limit,
            temperature=temperature, max_new_tokens=max_new_tokens,
        )  # fmt: skip
        built = build_components(options)
        summary = asyncio.run(
            evaluate(
                built.env,
                built.tasks,
                built.agent,
                built.user,
                out,
                trials=trials,
                concurrency=concurrency,
                max_turns=max_turns,
                cost=built.cost,
                show_progress=progress,
            )  # fmt: skip
        )
    except (ValueError, OSError) as exc:
        raise _fail(exc) from exc
    print_summary(summary, title=f"{agent} on {env}/{data}:{split} -> {out}")


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
        raise _fail(exc) from exc
    typer.echo(
        f"{stats.accepted}/{stats.trees} trees used: {stats.sft} SFT, {stats.kto_desirable} good + "
        f"{stats.kto_undesirable} bad KTO, {stats.dpo} DPO rows -> {out_dir}"
    )


def _register_data() -> None:
    from josh.envs.toolwoz.commands import data_app

    app.add_typer(data_app, name="data")


_register_data()


def _register_train() -> None:
    from josh.training.cli import train_app

    app.add_typer(train_app, name="train")


_register_train()


if __name__ == "__main__":
    app()
