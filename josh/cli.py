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


ENV = typer.Option("toolwoz", help="environment: toolwoz, retail or airline")
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
BASE_URL = typer.Option(None, help="OpenAI-compatible endpoint of the agent's openai backend, e.g. http://HOST:8000/v1")
USER_BASE_URL = typer.Option(
    None, help="endpoint of the user's openai backend (default: --base-url when the user shares the agent's model)"
)
TEMPERATURE = typer.Option(None, min=0.0, help="agent sampling temperature (default: the agent's)")
MAX_NEW_TOKENS = typer.Option(None, min=1, help="agent max new tokens per generation (default: the agent's)")
LLM_OPTION = typer.Option(
    None,
    "--llm-option",
    help="agent backend setting KEY=VALUE, repeatable: dtype=bfloat16, load_in_4bit=true, max_batch_size=64, "
    "prefix_cache_tokens=0, gpu_memory_utilization=0.8, max_concurrency=32, ... (see josh.llm.factory.LLMConfig)",
)


def _components(**names: object) -> object:
    """ComponentOptions from CLI values; temperature / max_new_tokens become the agent's sampling."""
    from josh.components import ComponentOptions
    from josh.llm.base import Sampling
    from josh.recipes import parse_override

    temperature, max_new = names.pop("temperature"), names.pop("max_new_tokens")
    llm_options = {}
    for text in names.pop("llm_option", None) or []:
        path, value = parse_override(text, "--llm-option", "dtype=bfloat16")
        if len(path) != 1:
            raise ValueError(f"bad --llm-option {text!r}: expected KEY=VALUE with a plain key, e.g. dtype=bfloat16")
        llm_options[path[0]] = value
    sampling = None
    if temperature is not None or max_new is not None:
        defaults = Sampling()
        sampling = Sampling(
            temperature=defaults.temperature if temperature is None else temperature,
            max_new_tokens=defaults.max_new_tokens if max_new is None else max_new,
        )
    return ComponentOptions(**names, llm_options=llm_options, agent_sampling=sampling)


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
    base_url: str | None = BASE_URL,
    user_base_url: str | None = USER_BASE_URL,
    temperature: float | None = TEMPERATURE,
    max_new_tokens: int | None = MAX_NEW_TOKENS,
    llm_option: list[str] | None = LLM_OPTION,
    beam: int = typer.Option(8, min=1, help="most live leaves per task"),
    branching: int = typer.Option(2, min=1, help="agent turns sampled per leaf while the beam has room"),
    max_depth: int = typer.Option(15, min=1, help="most agent turns per conversation"),
    limit: int | None = LIMIT,
    concurrency: int = typer.Option(16, min=1, help="tasks searched at the same time (per actor with --ray)"),
    progress: bool = typer.Option(True, help="show the progress bar"),
    ray_address: str | None = typer.Option(
        None, "--ray", help="run on Ray actors: 'local' starts a cluster here; 'auto', HOST:6379 or ray://HOST:10001"
    ),
    actors: int = typer.Option(2, min=1, help="--ray: actors, each with its own backend"),
    gpus_per_actor: float = typer.Option(0.0, min=0.0, help="--ray: GPUs per actor (1 = one vLLM engine per GPU)"),
    cpus_per_actor: float = typer.Option(1.0, min=0.0, help="--ray: CPUs per actor"),
    max_attempts: int = typer.Option(3, min=1, help="--ray: tries per task when actors die under it"),
) -> None:
    """JOSH beam search over a task split; one tree per task streamed to OUT/trees.jsonl (resumable)."""
    from josh.rollout import RolloutConfig, RolloutOptions, rollout_from_options
    from josh.search import SearchConfig

    try:
        components = _components(
            env=env, data=data, split=split, agent=agent, backend=backend, model=model, user=user,
            user_backend=user_backend, user_model=user_model, limit=limit,
            base_url=base_url, user_base_url=user_base_url,
            temperature=temperature, max_new_tokens=max_new_tokens, llm_option=llm_option,
        )  # fmt: skip
        search = SearchConfig(max_beam=beam, branching=branching, max_depth=max_depth)
        options = RolloutOptions(
            out=out, components=components, rollout=RolloutConfig(search=search, concurrency=concurrency)
        )
        if ray_address is None:
            stats = rollout_from_options(options, progress=progress)
        else:
            from josh.distributed import RayOptions, rollout_on_ray

            ray_options = RayOptions(
                address=ray_address, actors=actors, gpus_per_actor=gpus_per_actor,
                cpus_per_actor=cpus_per_actor, max_attempts=max_attempts,
            )  # fmt: skip
            stats = rollout_on_ray(options, ray_options, progress=progress)
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
    base_url: str | None = BASE_URL,
    user_base_url: str | None = USER_BASE_URL,
    temperature: float | None = TEMPERATURE,
    max_new_tokens: int | None = MAX_NEW_TOKENS,
    llm_option: list[str] | None = LLM_OPTION,
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
            base_url=base_url, user_base_url=user_base_url,
            temperature=temperature, max_new_tokens=max_new_tokens, llm_option=llm_option,
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
    from josh.diagnostics import print_diagnostics

    print_diagnostics(summary.diagnostics)


@app.command()
def extract(
    run: str = typer.Argument(..., help="rollout run folder (or its trees.jsonl)"),
    out: str | None = typer.Option(None, help="output folder (default: the run folder)"),
    min_reward: float = typer.Option(1.0, min=0.0, max=1.0, help="skip trees below this reward"),
    keep_errors: bool = typer.Option(False, help="keep ideal paths that contain tool or format errors"),
    tokenizer: str | None = typer.Option(None, help="count tokens with this HF tokenizer (default: whitespace)"),
    skip_bad_lines: bool = typer.Option(
        False, "--skip-bad-lines", help="skip trees.jsonl lines that are not trees (counted as unreadable)"
    ),
) -> None:
    """Turn rollout trees into sft.jsonl, kto.jsonl and dpo.jsonl (TRL conversational formats)."""
    from josh.extract import ExtractConfig, extract_run

    try:
        config = ExtractConfig(min_reward=min_reward, drop_errors=[] if keep_errors else ExtractConfig().drop_errors)
        stats, out_dir = extract_run(run, out, config, tokenizer=tokenizer, skip_bad_lines=skip_bad_lines)
    except (ValueError, OSError) as exc:
        raise _fail(exc) from exc
    typer.echo(
        f"{stats.accepted}/{stats.trees} trees used: {stats.sft} SFT, {stats.kto_desirable} good + "
        f"{stats.kto_undesirable} bad KTO, {stats.dpo} DPO rows -> {out_dir}"
        + (f" ({stats.unreadable} unreadable lines skipped)" if stats.unreadable else "")
    )


@app.command()
def view(
    run: str = typer.Argument(..., help="rollout run folder (or its trees.jsonl)"),
    task: str | None = typer.Option(None, "--task", help="one task's tree page (default: every task plus an index)"),
    out: str | None = typer.Option(
        None, "--out", help="HTML file to write (default: RUN/view/<task>.html or RUN/view/index.html)"
    ),
    open_: bool = typer.Option(False, "--open", help="open the page in the default browser"),
) -> None:
    """Self-contained HTML of JOSH search trees: ideal path, partial and pruned branches, tool calls."""
    from josh.view import open_in_browser, write_index, write_task

    try:
        if task is not None:
            page = write_task(run, task, out)
            typer.echo(f"tree of {task} -> {page}")
        else:
            page, rows = write_index(run, out)
            unreadable = sum(1 for r in rows if r.page is None)
            typer.echo(f"{len(rows)} tasks ({unreadable} unreadable) -> {page}")
    except (ValueError, OSError) as exc:
        raise _fail(exc) from exc
    if open_ and not open_in_browser(page):
        typer.echo(f"no browser could be started; open {page.resolve().as_uri()}")


@app.command("loop")
def loop_(
    recipe: str = typer.Option(..., "--recipe", "-r", help="loop recipe YAML, e.g. recipes/demo-cpu.yaml"),
    overrides: list[str] = typer.Option(None, "--set", help="override a recipe key, e.g. --set rounds=2"),
    progress: bool = typer.Option(True, help="show progress bars"),
) -> None:
    """Self-train: baseline eval, warm start, rounds of rollouts -> extract -> SFT/KTO -> eval, report (resumable)."""
    from josh.demo import run_with_table

    run_with_table(recipe, overrides or [], progress=progress)


@app.command()
def demo(
    overrides: list[str] = typer.Option(None, "--set", help="override a key of recipes/demo-cpu.yaml"),
    progress: bool = typer.Option(True, help="show progress bars"),
) -> None:
    """The CPU demo: JOSH self-training of SmolLM2-135M on the mini ToolWOZ set (offline; about 25 minutes on 2 cores)."""
    from josh.demo import demo_recipe, run_with_table

    run_with_table(str(demo_recipe()), overrides or [], progress=progress)


@app.command()
def matrix(
    out: str = typer.Option(
        ..., "--out", help="folder: one evaluation per cell, matrix.json, matrix.md (rerun to resume)"
    ),
    agents: list[str] = typer.Option(
        ..., "--agent", help="agent KIND[:BACKEND[:MODEL]], repeatable: oracle, react, react:hf:checkpoints/sft"
    ),
    users: list[str] = typer.Option(
        ..., "--user", help="user simulator KIND[:BACKEND[:MODEL]], repeatable: agenda, goal, goal:openai:gpt-4o"
    ),
    env: str = ENV,
    data: str = DATA,
    split: str = typer.Option("test", help="task split"),
    backend: str = typer.Option("hf", help="backend of LLM components that name none"),
    model: str = typer.Option("smollm2", help="model of LLM components that name none"),
    llm_option: list[str] | None = LLM_OPTION,
    trials: int = typer.Option(1, min=1, help="conversations per task and cell"),
    max_turns: int = typer.Option(15, min=1, help="most agent turns per conversation"),
    limit: int | None = LIMIT,
    concurrency: int = typer.Option(16, min=1, help="conversations in flight at the same time"),
    progress: bool = typer.Option(True, help="show progress bars"),
) -> None:
    """Evaluate every agent against every user simulator on the same tasks: reward table with intervals, each
    agent's spread across simulators, and where two agents' ranking flips."""
    import asyncio

    from rich.console import Console

    from josh.matrix import MatrixConfig, print_matrix, run_matrix

    console = Console()
    try:
        options = _components(llm_option=llm_option, temperature=None, max_new_tokens=None)
        config = MatrixConfig(
            env=env, data=data, split=split, agents=agents, users=users, backend=backend, model=model,
            llm_options=options.llm_options, limit=limit, trials=trials, max_turns=max_turns, concurrency=concurrency,
        )  # fmt: skip
        result = asyncio.run(run_matrix(config, out, progress=progress, say=lambda t: console.print(t, soft_wrap=True)))
    except (ValueError, OSError) as exc:
        raise _fail(exc) from exc
    print_matrix(result, console)


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
