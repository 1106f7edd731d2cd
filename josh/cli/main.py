"""The ``josh`` command. Each command is a thin wrapper; the work lives in the stage modules (imported lazily
so ``josh --help`` stays fast)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import typer
from rich.console import Console

from josh.cli.check_env import CheckEnvCommand, check_env
from josh.cli.data import data_app
from josh.cli.env import env_app
from josh.cli.export import export_app
from josh.cli.judging import (
    JUDGE_GRAMMAR_HELP,
    JUDGE_HELP,
    JUDGE_MAX_TOKENS,
    JUDGE_MAX_TOKENS_HELP,
    JUDGE_OPTION_HELP,
    arena,
    judge,
)
from josh.cli.judging import judge_spec as judge_spec_of
from josh.cli.options import (
    MAX_TURNS,
    PROGRESS,
    RunCommand,
    json_summary,
    key_values,
    option,
    prints_json,
    split_option,
)
from josh.cli.paper import import_paper
from josh.cli.run import eval_, rollout
from josh.cli.serve import serve
from josh.training.cli import train_app
from josh.util.atomic import no_half_made
from josh.util.errors import reported, reports_errors, set_verbose, skips_bad_lines
from josh.util.plan import PLAN_HELP
from josh.util.width import wide_when_not_a_terminal
from josh.version import __version__

app = typer.Typer(
    name="josh",
    help="Self-train tool-calling dialogue agents from sparse rewards (JOSH).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def main(
    verbose: bool = typer.Option(
        False, "--verbose", "-v", envvar="JOSH_VERBOSE", help="show the full traceback when a command fails"
    ),
) -> None:
    """JOSH: rollouts with turn-level beam search, SFT/KTO/DPO data, LoRA training, evaluation."""
    set_verbose(verbose)
    wide_when_not_a_terminal()  # tables whole in a pipe or a job's log, not cut to 80 columns
    # Idle OpenMP threads sleep instead of spinning (see josh.loop.demo): on a CPU shared with other work, spinning threads
    # made generation several times slower. Every command imports torch lazily, after this.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@app.command()
def version() -> None:
    """Print the installed josh version."""
    typer.echo(__version__)


app.command("rollout", cls=RunCommand)(rollout)
app.command("eval", cls=RunCommand)(eval_)


EXTRACT_AGENT_HELP = (
    "the prompted agent to train (react, function_calling, act): its system prompt, worked examples and protocol "
    "frame every row; default: the frame the trees recorded, which a scripted agent's trees lack (then required; "
    "'recorded' keeps them without a system prompt)"
)


@app.command()
@skips_bad_lines
@prints_json
def extract(
    run: str = typer.Argument(..., help="rollout run folder (or its trees.jsonl)"),
    out: str | None = typer.Option(None, help="output folder (default: the run folder)"),
    min_reward: float = typer.Option(1.0, min=0.0, max=1.0, help="skip trees below this reward"),
    keep_errors: bool = typer.Option(False, help="keep ideal paths that contain tool or format errors"),
    trim_at_failure: bool = typer.Option(
        False, help="keep an ideal path's turns before its first failed turn instead of dropping the tree"
    ),
    tokenizer: str | None = typer.Option(None, help="count tokens with this HF tokenizer (default: whitespace)"),
    formats: list[str] = typer.Option(
        None, "--format", help="file to write, repeatable: sft, kto, dpo (default: all three) or tree (advantages)"
    ),
    subtree: str = typer.Option("max", help="tree format: a turn's subtree reward is the max or mean of its leaves"),
    judge: str | None = typer.Option(None, "--judge", help=f"gate the ideal paths' replies with {JUDGE_HELP}"),
    judge_options: list[str] | None = typer.Option(None, "--judge-option", help=JUDGE_OPTION_HELP),
    judge_threshold: int = typer.Option(3, min=1, max=5, help="a turn scored below this on any dimension fails"),
    judge_route: str = typer.Option("drop", help="a failed turn leaves SFT (drop), and is a KTO undesirable (kto)"),
    judge_grammar: bool = typer.Option(True, help=JUDGE_GRAMMAR_HELP),
    judge_max_tokens: int = typer.Option(JUDGE_MAX_TOKENS, min=1, help=JUDGE_MAX_TOKENS_HELP),
    push_to_hub: str | None = typer.Option(
        None, "--push-to-hub", metavar="REPO", help="then push the files and their card to this Hub dataset repo"
    ),
    private: bool = typer.Option(False, "--private", help="with --push-to-hub: make a new repo private"),
    agent: str | None = typer.Option(None, help=EXTRACT_AGENT_HELP),
    agent_options: list[str] | None = typer.Option(None, "--agent-option", help="with --agent: its option, KEY=VALUE"),
) -> None:
    """Turn rollout trees into sft.jsonl, kto.jsonl and dpo.jsonl (TRL's conversational tool-calling format) with a
    dataset card (README.md), or tree.jsonl; --push-to-hub uploads them (needs josh-agents[train] and a Hub token)."""
    from josh.eval.judge.reply import reply_judge, rollout_policy  # heavy: the eval stage
    from josh.harvest.advantages import AdvantageConfig  # heavy: the harvest stage
    from josh.harvest.extract import TRL_FORMATS, ExtractConfig, extract_run  # heavy: the harvest stage
    from josh.harvest.judge_gate import JudgeGate  # heavy: the harvest stage
    from josh.harvest.reframe import run_reframe  # heavy: the harvest stage

    with reported(), no_half_made(out or run):
        spec = judge_spec_of(judge, judge_options, grammar=judge_grammar, max_tokens=judge_max_tokens)
        gate = None
        if spec is not None:
            gate = JudgeGate(**spec.model_dump(exclude={"concurrency"}), threshold=judge_threshold, route=judge_route)
        config = ExtractConfig(
            min_reward=min_reward,
            drop_errors=[] if keep_errors else ExtractConfig().drop_errors,
            trim_at_failure=trim_at_failure,
            judge=gate,
        )
        chosen = tuple(dict.fromkeys(formats)) if formats else TRL_FORMATS
        folder = Path(run) if Path(run).is_dir() else Path(run).parent
        scorer = reply_judge(rollout_policy(folder), gate.uses_grammar, gate.max_tokens) if gate else None
        reframe = run_reframe(run, agent, key_values(agent_options, "--agent-option", "examples=2"))
        stats, out_dir = extract_run(
            run, out, config, tokenizer=tokenizer, formats=chosen,
            advantages=AdvantageConfig(subtree=subtree), judge=scorer, reframe=reframe,
        )  # fmt: skip
        if push_to_hub:
            from josh.harvest.hub import push_rows  # heavy: the harvest stage

            pushed = push_rows(out_dir, push_to_hub, chosen, private=private)
    json_summary(stats)
    parts = []
    if set(chosen) & set(TRL_FORMATS):
        parts.append(
            f"{stats.accepted}/{stats.trees} trees used ({stats.trimmed} trimmed): {stats.sft} SFT, "
            f"{stats.kto_desirable} good + {stats.kto_undesirable} bad KTO, {stats.dpo} DPO rows"
        )
    if stats.gate is not None:
        g = stats.gate
        parts.append(
            f"judge gate {g.judge}: {g.replies} replies ({g.judged} judged, {g.cached} cached, {g.failed} failed), "
            f"{g.removed} turns removed ({g.to_kto} to KTO, {g.cut} later turns cut from SFT)"
        )
    if "tree" in chosen:
        parts.append(
            f"{stats.tree_rows} tree rows from {stats.tree_groups - stats.tree_zero_groups} sibling groups of "
            f"{stats.trees} trees ({stats.tree_zero_groups} groups with equal rewards skipped)"
        )
    typer.echo(
        "; ".join(parts) + f" -> {out_dir}"
        + (f" ({stats.unreadable} unreadable lines skipped)" if stats.unreadable else "")
        + (f" ({stats.unrenderable} trees the {agent} protocol cannot write left out)" if stats.unrenderable else "")
    )  # fmt: skip
    if push_to_hub:
        typer.echo(f"pushed {', '.join(pushed)} and the dataset card to https://huggingface.co/datasets/{push_to_hub}")


@app.command()
@skips_bad_lines
def view(
    run: str = typer.Argument(..., help="rollout run folder (or its trees.jsonl), or an evaluation folder"),
    task: str | None = typer.Option(None, "--task", help="one task's tree page (default: every task plus an index)"),
    out: str | None = typer.Option(
        None, "--out", help="HTML file to write (default: RUN/view/<task>.html or RUN/view/index.html)"
    ),
    open_: bool = typer.Option(False, "--open", help="open the page in the default browser"),
) -> None:
    """Self-contained HTML of JOSH search trees (ideal path, partial and pruned branches, tool calls), or of an
    evaluation's conversations with each reply's judgement beside it."""
    from josh.cli.view import (  # heavy: the viewer (jinja2 templates)
        is_evaluation,
        open_in_browser,
        write_conversations,
        write_index,
        write_task,
    )

    with reported():
        if is_evaluation(run):
            page, count = write_conversations(run, out)
            typer.echo(f"{count} conversations -> {page}")
        elif task is not None:
            page = write_task(run, task, out)
            typer.echo(f"tree of {task} -> {page}")
        else:
            page, rows = write_index(run, out)
            unreadable = sum(1 for r in rows if r.page is None)
            typer.echo(f"{len(rows)} tasks ({unreadable} unreadable) -> {page}")
    if open_ and not open_in_browser(page):
        typer.echo(f"no browser could be started; open {page.resolve().as_uri()}")


@app.command("loop")
@reports_errors
@skips_bad_lines
def loop_(
    recipe: str = typer.Option(..., "--recipe", "-r", help="loop recipe YAML, e.g. recipes/demo-cpu.yaml"),
    overrides: list[str] = typer.Option(None, "--set", help="override a recipe key, e.g. --set rounds=2"),
    seeds: int | None = typer.Option(
        None, "--seeds", min=1, help="run N independent seeds into RUN/seed-K/ with a combined report (= --set seeds=N)"
    ),
    progress: bool = PROGRESS,
    plan: bool = typer.Option(False, "--plan", help=PLAN_HELP),
) -> None:
    """Self-train: baseline eval, warm start, rounds of rollouts -> extract -> SFT/KTO -> eval, report (resumable)."""
    from josh.loop.demo import run_with_table  # heavy: the loop

    run_with_table(recipe, overrides or [], progress=progress, seeds=seeds, plan=plan)


@app.command("report")
@skips_bad_lines
def report_(
    run_dir: str = typer.Argument(..., help="a josh loop run folder (one seed, or the parent of seed-K/ folders)"),
    as_json: bool = typer.Option(False, "--json", help="print report.json instead of the tables"),
) -> None:
    """Rebuild a loop's report.md and report.json from its finished stages (nothing is rerun) and print it."""
    from josh.loop.render import print_loop_report, print_seeds_report  # heavy: the loop
    from josh.loop.seeds import SeedsReport, rebuild  # heavy: the loop

    with reported():
        report = rebuild(Path(run_dir))
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    elif isinstance(report, SeedsReport):
        print_seeds_report(report, Console())
    else:
        print_loop_report(report, Console())


@app.command("compare")
@reports_errors
@skips_bad_lines
def compare_(
    models: list[str] = typer.Argument(
        ...,
        help="LABEL=EVAL_DIR[,EVAL_DIR...] per model (several folders: pooled, e.g. training seeds); first = baseline",
    ),
    baseline: str = typer.Option(None, "--baseline", help="the label to compare every other model with"),
    as_json: bool = typer.Option(False, "--json", help="print the comparison as JSON instead of the tables"),
) -> None:
    """Paired per-task comparison of finished evaluations, pooling several evaluations (seeds) per model."""
    from josh.eval.compare import compare_evaluations, print_compare  # heavy: the eval stage

    report = compare_evaluations(models, baseline)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        print_compare(report, Console())


@app.command()
@reports_errors
@skips_bad_lines
def demo(
    overrides: list[str] = typer.Option(None, "--set", help="override a key of recipes/demo-cpu.yaml"),
    progress: bool = PROGRESS,
) -> None:
    """The CPU demo: JOSH self-training of SmolLM2-135M on the mini ToolWOZ set (offline; 18 to 20 minutes on 2 cores)."""
    from josh.loop.demo import demo_recipe, run_with_table  # heavy: the loop

    run_with_table(str(demo_recipe()), overrides or [], progress=progress)


@app.command()
@reports_errors
@skips_bad_lines
@prints_json
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
    env: str = option("env"),
    data: str = option("data"),
    env_options: list[str] | None = option("env_options"),
    split: str = split_option("test"),
    backend: str = typer.Option("hf", help="backend of LLM components that name none"),
    model: str = typer.Option("smollm2", help="model of LLM components that name none"),
    llm_options: list[str] | None = option("llm_options"),
    trials: int = typer.Option(1, min=1, help="conversations per task and cell"),
    max_turns: int = MAX_TURNS,
    limit: int | None = option("limit"),
    concurrency: int = typer.Option(16, min=1, help="conversations in flight at the same time"),
    progress: bool = PROGRESS,
) -> None:
    """Evaluate every agent against every user simulator on the same tasks: reward table with intervals, each
    agent's spread across simulators, and where two agents' ranking flips."""
    from josh.eval.matrix import MatrixConfig, print_matrix, run_matrix  # heavy: the eval stage

    console = Console()
    settings = key_values(llm_options, "--llm-option", "dtype=bfloat16")
    config = MatrixConfig(
        env=env, data=data, env_options=key_values(env_options, "--env-option", "judge=openai:gpt-4.1"), split=split,
        agents=agents, users=users, backend=backend, model=model,
        llm_options=settings, limit=limit, trials=trials, max_turns=max_turns, concurrency=concurrency,
    )  # fmt: skip
    result = asyncio.run(run_matrix(config, out, progress=progress, say=lambda t: console.print(t, soft_wrap=True)))
    json_summary(result)
    print_matrix(result, console)


data_app.command("import-paper")(import_paper)
app.add_typer(data_app, name="data")
app.add_typer(train_app, name="train")

app.command()(judge)
app.command()(arena)
app.command("check-env", cls=CheckEnvCommand)(check_env)
app.add_typer(export_app, name="export")
app.add_typer(env_app, name="env")
app.command()(serve)


if __name__ == "__main__":
    app()
