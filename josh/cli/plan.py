"""``josh eval --plan`` and ``josh rollout --plan``: the run resolved (``josh.run.plan``), what is left to run and
at most what it costs, as the lines of a plan (``josh.util.plan`` prints them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from josh.run.components import ComponentOptions
    from josh.run.plan import Bound, RunPlan
    from josh.search.algorithm import SearchConfig


def bound_text(bound: Bound) -> tuple[str, str]:
    """The LLM calls and generated tokens of a bound, as a plan prints them."""
    calls = f"{bound.calls:,} (agent {bound.agent_calls:,}, user {bound.user_calls:,})" if bound.calls else "0"
    return calls, f"{bound.tokens:,}"


def run_lines(plan: RunPlan) -> dict[str, str]:
    """The lines of a resolved run: environment, splits, tasks, components and what each LLM loads."""
    splits = ", ".join(f"{name} {size}" for name, size in plan.splits.items()) or "(served)"
    lines = {
        "environment": f"{plan.env} (data {plan.data})",
        "splits": splits,
        "tasks": f"{plan.tasks} of {plan.split}",
        "agent": plan.agent,
        "user": plan.user,
    }
    lines.update({f"{role} LLM": loads for role, loads in plan.llms.items()})
    return lines


def eval_lines(spec: ComponentOptions, out: str, trials: int, max_turns: int) -> dict[str, str]:
    """``josh eval --plan``: the run resolved, the conversations to run (after those ``out`` holds) and their bound."""
    from josh.envs import build_env  # deferred: keeps josh --help light
    from josh.eval.evaluate import finished_count  # deferred: keeps josh --help light
    from josh.run.plan import conversation_bound, plan_run  # deferred: keeps josh --help light

    plan = plan_run(spec)
    lines = run_lines(plan)
    total = plan.tasks * trials
    done = 0
    if plan.splits and Path(out).is_dir():
        tasks = build_env(spec.env, spec.data, spec.env_options).tasks(spec.split)[: spec.limit]
        done = finished_count(out, tasks, trials)
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
    from josh.run.plan import opening_bound, plan_run, turn_bound  # deferred: keeps josh --help light
    from josh.run.resumable import finished_keys  # deferred: keeps josh --help light
    from josh.util.jsonl import iter_jsonl  # deferred: keeps josh --help light
    from josh.util.layout import TREES  # deferred: keeps josh --help light

    plan = plan_run(spec)
    lines = run_lines(plan)
    trees = Path(out) / TREES
    done = 0
    if trees.is_file():
        done = len(
            finished_keys((str(r["task_id"]), bool(r.get("failed"))) for r in iter_jsonl(trees) if "task_id" in r)
        )
    todo = max(plan.tasks - done, 0)
    lines["search"] = f"beam {search.max_beam}, branching {search.branching}, at most {search.max_depth} agent turns"
    lines["resume"] = f"{done} trees already done in {out}, {todo} to search" if done else f"none done yet in {out}"
    lines["LLM calls (at most)"], lines["generated tokens (at most)"] = bound_text(
        (turn_bound(spec) * search.expanded_turns + opening_bound(spec)) * todo
    )
    return lines
