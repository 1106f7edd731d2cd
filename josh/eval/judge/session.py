"""One judging session over an evaluation folder, as ``josh judge`` and ``josh eval --judge`` run it: the judge named
``BACKEND:MODEL`` with its backend settings, its LLM built and closed, the run's environment found from its
``summary.json``, the judge and prompt version recorded in the run's provenance (``summary.json``'s ``run`` block
and ``judge_summary.json``'s), a warning when the judge is the agent's own model, and the judge's table.

OpenAI's own API takes no grammar, so a judge on the ``openai`` backend without a ``base_url`` answers unconstrained
(its answers are parsed all the same); every other backend judges under the grammar unless told not to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from josh.core.env import Env
from josh.core.llm import LLM, run_with_llms
from josh.envs import build_env
from josh.eval.judge.rubric import PROMPT_VERSION
from josh.eval.judge.runner import JudgeSummary, judge_run
from josh.eval.summary import fmt_interval
from josh.run.components import build_llms, check_llms
from josh.run.info import run_info, split_adapter
from josh.run.spec import JudgeSpec
from josh.util.atomic import write_atomic
from josh.util.layout import RESULTS, SUMMARY


def run_block(folder: Path) -> dict[str, Any]:
    """The ``run`` block of a folder's ``summary.json`` ({} when there is none to read)."""
    try:
        run = json.loads((folder / SUMMARY).read_text(encoding="utf-8")).get("run")
    except (OSError, ValueError, AttributeError):
        return {}
    return run if isinstance(run, dict) else {}


def self_judging(run: dict[str, Any], spec: JudgeSpec) -> str | None:
    """A warning when the judge is the run's agent model (same backend and model, or the agent's adapter)."""
    base, adapter = split_adapter(spec.model)
    if spec.backend != run.get("backend") or not run.get("model"):
        return None
    same = (base == run.get("model") and adapter == run.get("adapter")) or (
        adapter is not None and adapter == run.get("adapter")
    )
    if not same:
        return None
    return f"warning: the judge {spec.name} is the agent's own model, which tends to rate its own replies higher"


def record_judge(folder: Path, spec: JudgeSpec) -> None:
    """Name the judge, its prompt version and token limit in ``summary.json``'s ``run`` block (when the folder has
    one)."""
    path = folder / SUMMARY
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(summary, dict) or not isinstance(summary.get("run"), dict):
        return
    summary["run"].update(judge=spec.name, judge_prompt_version=PROMPT_VERSION, judge_max_tokens=spec.max_tokens)
    write_atomic(path, json.dumps(summary, indent=2) + "\n")


def judged_env(folder: Path, env: str | None, data: str | None) -> Env:
    """The run's environment: ``env``/``data`` when given, else those its ``summary.json`` names."""
    info = run_block(folder)
    name = env or info.get("env")
    if not name:
        raise ValueError(f"{folder} names no environment (no {SUMMARY} with run info): pass --env and --data")
    return build_env(name, data or info.get("data") or "mini")


def check_judge(spec: JudgeSpec) -> None:
    """Check the judge's backend and settings, and that its endpoint answers, without loading a model."""
    key, settings = spec.llm_key()
    check_llms({key: settings})


def build_judge(spec: JudgeSpec) -> LLM:
    """The judge's LLM, checked first (a bad setting or a down endpoint is one clear error)."""
    key, settings = spec.llm_key()
    return build_llms(check_llms({key: settings}))[key]


def judge_folder(folder: str | Path, spec: JudgeSpec, env: Env) -> JudgeSummary:
    """Judge every reply of ``folder`` with ``spec``'s judge (resumable), record the judge in the run's provenance,
    and return the summary. A down endpoint fails here, before any judging, with one clear error."""
    folder = Path(folder)
    if not (folder / RESULTS).is_file():
        raise FileNotFoundError(f"no conversations to judge in {folder}: run `josh eval --out {folder}` first")
    llm = build_judge(spec)
    provenance = run_info(judge=spec.name, judge_prompt_version=PROMPT_VERSION, judge_max_tokens=spec.max_tokens)
    work = judge_run(
        folder, env, llm, judge=spec.name, concurrency=spec.concurrency, grammar=spec.uses_grammar,
        max_tokens=spec.max_tokens, run=provenance,
    )  # fmt: skip
    try:
        summary = run_with_llms([llm], work)
    finally:
        llm.close()
    record_judge(folder, spec)
    return summary


def print_judge_summary(summary: JudgeSummary, console: Console | None = None) -> None:
    """The judge's table: each dimension's mean score, the n/a counts, and the judge's own cost."""
    too_long = f", {summary.overflowed} too long for the judge" if summary.overflowed else ""
    table = Table(title=f"judge {summary.judge} ({summary.replies} replies, {summary.failed} failed{too_long})")
    table.add_column("dimension")
    table.add_column("mean score [95% CI]")
    for name, interval in summary.scores.items():
        table.add_row(name, fmt_interval(interval))
    for name, count in summary.not_applicable.items():
        table.add_row(name, f"n/a for {count} replies (no policy)")
    table.add_section()
    table.add_row("judge LLM calls", f"{summary.llm_calls:,}")
    table.add_row("judge tokens (prompt + completion)", f"{summary.prompt_tokens:,} + {summary.completion_tokens:,}")
    table.add_row("judge cost (USD)", f"{summary.cost:.4f}")
    table.add_row("judge wall time", f"{summary.wall_s:.1f} s")
    table.add_row("prompt version", summary.prompt_version)
    (console or Console()).print(table)
