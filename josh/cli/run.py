"""``josh rollout`` and ``josh eval``: the commands that run conversations on the run options (``josh.cli.options``),
resumable, each ending with its figures and exiting 1 when pieces failed on LLM errors. Registered on the app by
``josh.cli.main``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from josh.cli.judging import (
    JUDGE_GRAMMAR_HELP,
    JUDGE_HELP,
    JUDGE_MAX_TOKENS,
    JUDGE_MAX_TOKENS_HELP,
    JUDGE_OPTION_HELP,
    judge_after_eval,
)
from josh.cli.judging import judge_spec as judge_spec_of
from josh.cli.options import MAX_TURNS, PROGRESS, json_summary, prints_json, run_options
from josh.cli.plan import eval_lines, rollout_lines
from josh.llm.health import stop_if_failing
from josh.util.atomic import no_half_made
from josh.util.errors import reported, skips_bad_lines
from josh.util.layout import EVAL_LOG, ROLLOUT_LOG
from josh.util.plan import PLAN_HELP, print_plan
from josh.util.quiet import noise_to

if TYPE_CHECKING:
    from josh.run.components import ComponentOptions

RUN_SPEC: Any = None  # stands for the run options, which @run_options puts in its place


def runs_conversations(split: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command that runs conversations (rollout, eval): the run options with ``split`` by default, ``--json`` and
    ``--skip-bad-lines``; registered with ``cls=RunCommand``."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        return skips_bad_lines(prints_json(run_options(split=split)(command)))

    return decorate


@runs_conversations(split="train")
def rollout(
    out: str = typer.Option(..., "--out", help="run folder: trees.jsonl and stats.json go here (rerun to resume)"),
    spec: ComponentOptions = RUN_SPEC,
    beam: int = typer.Option(8, min=1, help="most live leaves per task"),
    branching: int = typer.Option(2, min=1, help="agent turns sampled per leaf while the beam has room"),
    max_depth: int = MAX_TURNS,
    concurrency: int = typer.Option(16, min=1, help="tasks searched at the same time (per actor with --ray)"),
    progress: bool = PROGRESS,
    ray_address: str | None = typer.Option(
        None, "--ray", help="run on Ray actors: 'local' starts a cluster here; 'auto', HOST:6379 or ray://HOST:10001"
    ),
    actors: int = typer.Option(2, min=1, help="--ray: actors, each with its own backend"),
    gpus_per_actor: float = typer.Option(0.0, min=0.0, help="--ray: GPUs per actor (1 = one vLLM engine per GPU)"),
    cpus_per_actor: float = typer.Option(1.0, min=0.0, help="--ray: CPUs per actor"),
    max_attempts: int = typer.Option(3, min=1, help="--ray: tries per task when actors die under it"),
    plan: bool = typer.Option(False, "--plan", help=PLAN_HELP),
) -> None:
    """JOSH beam search over a task split; one tree per task streamed to OUT/trees.jsonl (resumable)."""
    from josh.run.components import preflight  # heavy: the run layer
    from josh.search.algorithm import SearchConfig  # heavy: the search layer
    from josh.search.rollout import RolloutConfig, RolloutOptions, rollout_from_options  # heavy: the search layer

    if plan:
        with reported():
            lines = rollout_lines(spec, out, SearchConfig(max_beam=beam, branching=branching, max_depth=max_depth))
        return print_plan(f"josh rollout --plan -> {out}", lines)
    resume = f"finished trees are in {out}/trees.jsonl; rerun the same command to resume"
    with reported(interrupted=resume), no_half_made(out):
        search = SearchConfig(max_beam=beam, branching=branching, max_depth=max_depth)
        options = RolloutOptions(
            out=out, components=spec, rollout=RolloutConfig(search=search, concurrency=concurrency)
        )
        preflight(spec)
        with noise_to(Path(out) / ROLLOUT_LOG):
            if ray_address is None:
                stats = rollout_from_options(options, progress=progress)
            else:
                from josh.search.distributed import RayOptions, rollout_on_ray  # heavy: the search layer

                ray_options = RayOptions(
                    address=ray_address, actors=actors, gpus_per_actor=gpus_per_actor,
                    cpus_per_actor=cpus_per_actor, max_attempts=max_attempts,
                )  # fmt: skip
                stats = rollout_on_ray(options, ray_options, progress=progress)
    json_summary(stats)
    failed = f", {stats.failed} failed (LLM errors; not counted, searched again on rerun)" if stats.failed else ""
    typer.echo(
        f"{stats.tasks} tasks ({stats.skipped_finished} already done{failed}), {stats.success} reached 100%, "
        f"mean reward {stats.mean_reward:.3f}, {stats.llm_calls} LLM calls, "
        f"{stats.prompt_tokens + stats.completion_tokens} tokens -> {out}"
    )
    if stats.endings:
        endings = ", ".join(f"{name} {count}" for name, count in sorted(stats.endings.items()))
        typer.echo(f"branches ended on a prompt longer than its model's context: {endings}")
    if stats.llm_errors or stats.failed_tasks:
        typer.secho(
            f"errors: {stats.llm_errors} turns cut short by LLM errors, {stats.failed_tasks} tasks not searched "
            f"(see {out}/stats.json)",
            fg="yellow",
        )
    _exit_if_failed(stats.failed, "trees", out)


@runs_conversations(split="test")
def eval_(
    out: str = typer.Option(..., "--out", help="run folder: results.jsonl and summary.json (rerun to resume)"),
    spec: ComponentOptions = RUN_SPEC,
    trials: int = typer.Option(1, min=1, help="conversations per task (pass^k for k = 1..trials)"),
    max_turns: int = MAX_TURNS,
    concurrency: int = typer.Option(16, min=1, help="conversations in flight at the same time"),
    progress: bool = PROGRESS,
    judge: str | None = typer.Option(None, "--judge", help=f"then score every reply with {JUDGE_HELP}"),
    judge_options: list[str] | None = typer.Option(None, "--judge-option", help=JUDGE_OPTION_HELP),
    judge_grammar: bool = typer.Option(True, help=JUDGE_GRAMMAR_HELP),
    judge_max_tokens: int = typer.Option(JUDGE_MAX_TOKENS, min=1, help=JUDGE_MAX_TOKENS_HELP),
    plan: bool = typer.Option(False, "--plan", help=PLAN_HELP),
) -> None:
    """Evaluate an agent (no search) on a split: average reward, 100% success, pass^k, error shares, cost."""
    from josh.eval.evaluate import evaluate, finished_count  # heavy: the eval stage
    from josh.eval.summary import print_summary  # heavy: the eval stage
    from josh.run.components import build_components, preflight  # heavy: the run layer

    if plan:
        with reported():
            judge_spec_of(judge, judge_options, grammar=judge_grammar, max_tokens=judge_max_tokens, check=True)
            lines = eval_lines(spec, out, trials, max_turns)
        return print_plan(f"josh eval --plan -> {out}", lines)
    resume = f"finished conversations are in {out}/results.jsonl; rerun the same command to resume"
    with reported(interrupted=resume), no_half_made(out):
        preflight(spec)
        judge_spec = judge_spec_of(judge, judge_options, grammar=judge_grammar, max_tokens=judge_max_tokens, check=True)
        with noise_to(Path(out) / EVAL_LOG):
            built = build_components(spec, check_connection=False)
        try:
            done = finished_count(out, built.tasks, trials)
            if done:
                typer.echo(f"resuming {out}: {done} of {len(built.tasks) * trials} conversations already done")
            with noise_to(Path(out) / EVAL_LOG):
                summary = built.run(
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
                        guard=lambda: stop_if_failing(built.llms),
                        run=spec.run_info(),
                    )
                )
            if summary.failed:
                stop_if_failing(built.llms, ended=True)
        finally:
            built.close()
    json_summary(summary)
    print_summary(summary, title=f"{spec.agent} on {spec.env}/{spec.data}:{spec.split} -> {out}")
    _print_errors(summary.error_counts, out)
    from josh.run.diagnostics import print_diagnostics  # heavy: the run layer

    print_diagnostics(summary.diagnostics)
    _exit_if_failed(summary.failed, "conversations", out)
    if judge_spec is not None:
        judge_after_eval(Path(out), judge_spec, built.env)


def _exit_if_failed(failed: int, what: str, out: str) -> None:
    """A run that ended with failed pieces (their LLM failed; not in the figures) exits 1, saying so."""
    if failed:
        typer.secho(
            f"incomplete: {failed} {what} failed on LLM errors and are not counted; rerun the same command to redo "
            f"them ({out})",
            fg="red",
        )
        raise typer.Exit(1)


def _print_errors(counts: dict[str, int], out: str) -> None:
    """One line with the run's error counts (LLM failures first), when there were any."""
    if not counts:
        return
    order = sorted(counts, key=lambda k: (k != "llm_error", -counts[k], k))
    text = ", ".join(f"{k} {counts[k]}" for k in order)
    typer.secho(f"errors: {text} (per conversation in {out}/results.jsonl)", fg="yellow")
