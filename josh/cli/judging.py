"""The judging commands: ``josh judge`` (TD-Eval's turn-level scores of an evaluation, or ``--calibrate``), ``josh
arena`` (pairwise comparison of runs) and what ``josh eval --judge`` runs after an evaluation. Registered on the app by
``josh.cli.main``; the work lives in ``josh.eval.judge``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from josh.cli.options import json_summary, key_values, prints_json
from josh.llm.factory import llm_config
from josh.registry import parse_backend_model
from josh.run.spec import JudgeSpec
from josh.util.errors import reported, reports_errors, skips_bad_lines
from josh.util.layout import EVAL_LOG, RESULTS
from josh.util.quiet import noise_to

JUDGE_HELP = "the LLM judge, BACKEND:MODEL (e.g. hf:smollm2, openai:gpt-4.1)"
JUDGE_OPTION_HELP = "judge backend setting, KEY=VALUE, repeatable (e.g. base_url=http://HOST:8000/v1)"
JUDGE_MAX_TOKENS = 400  # JudgeSpec.max_tokens's default (josh.run.spec is not imported here: it keeps --help light)
JUDGE_MAX_TOKENS_HELP = "most tokens the judge writes per answer (an answer cut short counts as a failed judgement)"
JUDGE_GRAMMAR_HELP = "constrain the judge's answer with a grammar (off for servers that take none: josh serve; OpenAI's API never gets one)"


def judge_spec(
    judge: str | None,
    options: list[str] | None,
    *,
    grammar: bool = True,
    concurrency: int = 8,
    max_tokens: int = JUDGE_MAX_TOKENS,
    check: bool = False,
) -> Any:
    """The judge of every command that takes one: ``--judge BACKEND:MODEL`` with its ``--judge-option`` settings,
    ``--judge-grammar`` and ``--judge-max-tokens`` (None without ``--judge``), its backend and settings checked;
    ``check``: its endpoint asked now too."""
    if judge is None:
        if options:
            raise ValueError("--judge-option needs --judge BACKEND:MODEL")
        return None

    backend, model = parse_backend_model(judge, "--judge")
    settings = key_values(options, "--judge-option", "dtype=bfloat16")
    spec = JudgeSpec(
        backend=backend, model=model, llm_options=settings, grammar=grammar, concurrency=concurrency,
        max_tokens=max_tokens,
    )  # fmt: skip

    llm_config(spec.backend, spec.model, **spec.llm_options)  # a bad backend or setting: one line, before any work
    if check:
        from josh.eval.judge.session import check_judge  # heavy: the eval stage

        check_judge(spec)
    return spec


def judge_after_eval(folder: Path, spec: Any, env: Any) -> None:
    """``josh eval --judge``: the finished evaluation judged, and the judge's table."""
    from josh.eval.judge.session import (  # heavy: the eval stage
        judge_folder,
        print_judge_summary,
        run_block,
        self_judging,
    )

    with reported(interrupted=f"finished judgements are in {folder}; rerun the same command to resume"):
        warning = self_judging(run_block(folder), spec)
        if warning:
            typer.secho(warning, fg="yellow")
        with noise_to(folder / EVAL_LOG):
            summary = judge_folder(folder, spec, env)
    print_judge_summary(summary)


@reports_errors
@skips_bad_lines
@prints_json
def judge(
    run: str | None = typer.Argument(None, help="a finished `josh eval` folder (results.jsonl)"),
    judge: str = typer.Option("hf:smollm2", "--judge", help=JUDGE_HELP),
    judge_options: list[str] | None = typer.Option(None, "--judge-option", help=JUDGE_OPTION_HELP),
    env: str | None = typer.Option(None, help="environment of the run (default: the one its summary.json names)"),
    data: str | None = typer.Option(None, help="its data (default: the one its summary.json names)"),
    concurrency: int = typer.Option(8, min=1, help="judge requests in flight at the same time"),
    judge_grammar: bool = typer.Option(True, help=JUDGE_GRAMMAR_HELP),
    judge_max_tokens: int = typer.Option(JUDGE_MAX_TOKENS, min=1, help=JUDGE_MAX_TOKENS_HELP),
    calibrate: bool = typer.Option(
        False, "--calibrate", help="judge the shipped hand-labelled turns instead of a run: agreement per dimension"
    ),
) -> None:
    """Score every agent reply of an evaluation on cohesion, backend consistency and policy compliance (TD-Eval)."""
    from josh.eval.judge.session import (  # heavy: the eval stage
        judge_folder,
        judged_env,
        print_judge_summary,
        run_block,
        self_judging,
    )

    spec = judge_spec(judge, judge_options, grammar=judge_grammar, concurrency=concurrency, max_tokens=judge_max_tokens)
    if calibrate:
        from josh.eval.judge.calibration import calibrate as run_calibration  # heavy: the eval stage
        from josh.eval.judge.calibration import print_calibration  # heavy: the eval stage

        report = run_calibration(spec)
        json_summary(report)
        print_calibration(report)
        return
    if run is None:
        raise ValueError("give the evaluation folder to judge (or --calibrate)")
    folder = Path(run)
    if not (folder / RESULTS).is_file():
        raise FileNotFoundError(f"no conversations to judge in {folder}: run `josh eval --out {folder}` first")
    warning = self_judging(run_block(folder), spec)
    if warning:
        typer.secho(warning, fg="yellow")
    summary = judge_folder(folder, spec, judged_env(folder, env, data))
    json_summary(summary)
    print_judge_summary(summary)


@reports_errors
@skips_bad_lines
@prints_json
def arena(
    runs: list[str] = typer.Argument(..., help="two or more finished `josh eval` folders of one environment"),
    out: str = typer.Option(
        ..., "--out", help="folder: arena_judgements.jsonl, arena_summary.json, arena.png (rerun to resume)"
    ),
    judge: str = typer.Option("hf:smollm2", "--judge", help=JUDGE_HELP),
    judge_options: list[str] | None = typer.Option(None, "--judge-option", help=JUDGE_OPTION_HELP),
    concurrency: int = typer.Option(8, min=1, help="judge requests in flight at the same time"),
    judge_grammar: bool = typer.Option(True, help=JUDGE_GRAMMAR_HELP),
    judge_max_tokens: int = typer.Option(200, min=1, help="most tokens the judge writes per verdict"),
) -> None:
    """Compare runs conversation by conversation: a judge picks the better agent of each pair, in both orders, and
    the runs are ranked by Bradley-Terry strength and Elo (TD-Eval's arena)."""
    from josh.eval.judge.arena import load_runs, shared_keys  # heavy: the eval stage
    from josh.eval.judge.arena_runner import arena_session, arena_table, skipped_counts  # heavy: the eval stage

    spec = judge_spec(judge, judge_options, grammar=judge_grammar, concurrency=concurrency, max_tokens=judge_max_tokens)
    loaded = load_runs(runs)
    shared = len(shared_keys(loaded))
    skipped = ", ".join(f"{label} {count}" for label, count in skipped_counts(loaded).items())
    typer.echo(f"{shared} conversations (task, trial) shared by all {len(loaded)} runs; not shared, skipped: {skipped}")
    if not shared:
        raise ValueError("the runs share no (task, trial) conversation: evaluate them on the same tasks")
    summary = arena_session(
        loaded, out, backend=spec.backend, model=spec.model, llm_options=spec.llm_options,
        concurrency=spec.concurrency, grammar=spec.grammar, max_tokens=spec.max_tokens,
    )  # fmt: skip
    json_summary(summary)
    Console().print(arena_table(summary))
    typer.echo(f"-> {out}")
