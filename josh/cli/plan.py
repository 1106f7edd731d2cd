"""``josh eval --plan`` and ``josh rollout --plan``: the run resolved (``josh.run.plan``), what is left to run and
at most what it costs, as the lines of a plan (``josh.util.plan`` prints them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from josh.util.jsonl import iter_jsonl
from josh.util.layout import TREES

if TYPE_CHECKING:
    from josh.run.components import ComponentOptions
    from josh.run.plan import Bound
    from josh.search.algorithm import SearchConfig


def bound_text(bound: Bound) -> tuple[str, str]:
    """The LLM calls and generated tokens of a bound, as a plan prints them."""
    calls = f"{bound.calls:,} (agent {bound.agent_calls:,}, user {bound.user_calls:,})" if bound.calls else "0"
    return calls, f"{bound.tokens:,}"


def eval_lines(spec: ComponentOptions, out: str, trials: int, max_turns: int) -> dict[str, str]:
    """``josh eval --plan``: the run resolved, the conversations to run (after those ``out`` holds) and their bound."""
    from josh.eval.evaluate import finished_count  # heavy: the eval stage
    from josh.run.plan import conversation_bound, plan_run  # heavy: the run layer

    plan = plan_run(spec)
    lines = plan.lines()
    total = plan.tasks * trials
    done = finished_count(out, plan.chosen, trials) if Path(out).is_dir() else 0
    todo = total - done
    lines["conversations"] = f"{total} ({plan.tasks} tasks x {trials} trials, at most {max_turns} agent turns each)"
    lines["resume"] = f"{done} already done in {out}, {todo} to run" if done else f"none done yet in {out}"
    lines["LLM calls (at most)"], lines["generated tokens (at most)"] = bound_text(
        conversation_bound(spec, max_turns) * todo
    )
    return lines


def rollout_lines(spec: ComponentOptions, out: str, search: SearchConfig) -> dict[str, str]:
    """``josh rollout --plan``: the run resolved, the tasks to search (after the trees ``out`` holds) and their
    bound."""
    from josh.run.plan import plan_run, search_bound  # heavy: the run layer
    from josh.run.resumable import finished_keys  # heavy: the run layer

    plan = plan_run(spec)
    lines = plan.lines()
    trees = Path(out) / TREES
    done = 0
    if trees.is_file():  # read only: the run itself cuts a torn last line off, a plan writes nothing
        scan = ((str(r["task_id"]), bool(r.get("failed"))) for r in iter_jsonl(trees) if "task_id" in r)
        done = len(finished_keys(scan) & {task.id for task in plan.chosen})
    todo = plan.tasks - done
    lines["search"] = f"beam {search.max_beam}, branching {search.branching}, at most {search.max_depth} agent turns"
    lines["resume"] = f"{done} trees already done in {out}, {todo} to search" if done else f"none done yet in {out}"
    lines["LLM calls (at most)"], lines["generated tokens (at most)"] = bound_text(
        search_bound(spec, search.expanded_turns) * todo
    )
    return lines
