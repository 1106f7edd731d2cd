"""josh's ToolWOZ environment against the paper's recorded one: the authors' JOSH rollouts replayed call by call.

Every APICALL of the authors' Llama-3-8B JOSH trees (josh-train 0.1.4, 926 train conversations) is replayed, as
the authors' code read it, through josh's ToolWOZ environment on tasks built from the wheel's own ``data.json``,
each tree node on a fork of its parent's state. A served result agrees with the recorded ``APIRETURN`` when both
are errors, both searches return the same entity (name or trainID) or both nothing, or both bookings succeed
with the same reference or both fail. It prints the agreement per call type, josh's full reward on each tree's
ideal path against the authors' ``100_percent_reached``, the disagreements by kind with examples, and the load.

    python benchmarks/toolwoz_paper_replay.py PATH/josh_train-0.1.4-py3-none-any.whl [--examples 3]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from josh.agents import agent_prompt
from josh.agents.react import ReactProtocol
from josh.core.env import ConversationState
from josh.envs.toolwoz.data import load_toolwoz
from josh.envs.toolwoz.env import ToolWOZEnv
from josh.envs.toolwoz.goals import TaskPlan
from josh.envs.toolwoz.normalize import is_no_constraint, is_subset, normalize, normalize_args
from josh.envs.toolwoz.schema import Rejection, validate
from josh.harvest.paper_archive import read_rollouts, unpack_toolwoz
from josh.harvest.paper_trees import ConvertStats, authors_calls, rollout_tree
from josh.search.tree import Tree
from josh.types import Task, ToolCall, ToolResult, is_success

REACT = ReactProtocol()


@dataclass
class Tally:
    """Agreement counts per call type, disagreements per kind with a few examples, reward agreement."""

    examples: int
    calls: Counter[str] = field(default_factory=Counter)
    agree: Counter[str] = field(default_factory=Counter)
    kinds: Counter[tuple[str, str]] = field(default_factory=Counter)
    shown: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    rewards: Counter[tuple[bool, bool]] = field(default_factory=Counter)
    unmet: Counter[str] = field(default_factory=Counter)
    unmet_shown: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    missing_tasks: int = 0


def _key(row: Any) -> str | None:
    """A served row's identity: its DB id (the authors' SQLite copy names some rows differently, e.g. ``meze`` for
    ``meze bar``), or a train's trainID and day (MultiWOZ reuses trainIDs across days)."""
    if not isinstance(row, dict):
        return None
    if "trainID" in row:
        return f"{row['trainID']} {row.get('day')}".lower()
    return f"id {row['id']}" if "id" in row else None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text


def verdict(recorded: Any, served: ToolResult) -> str | None:
    """``None`` when the served result agrees with the recorded one, else the kind of disagreement."""
    if isinstance(recorded, str):
        return None if served.error else "authors rejected the call, josh served it"
    if served.error:
        return f"josh rejects ({served.error.value}), authors served"
    mine = _loads(served.content)
    if isinstance(recorded, list):
        theirs, ours = _key(recorded[0]) if recorded else None, _key(mine[0]) if mine else None
        if theirs == ours:
            return None
        if ours is None:
            return "search: authors returned a row, josh none"
        return "search: authors returned none, josh a row" if theirs is None else "search: a different row"
    booked, ours_booked = bool(recorded.get("success")), bool(mine.get("success"))
    if booked != ours_booked:
        return "booking: authors booked, josh refused" if booked else "booking: authors refused, josh booked"
    if not isinstance(recorded.get("return"), dict):
        return "booking: the authors' result has no return"
    if booked and str(recorded["return"].get("reference")) != str(mine.get("reference")):
        return "booking: a different reference"
    return None


def _fail_info(task: Task, domain: str) -> dict[str, str]:
    goal = task.details.get("goal", {}).get(domain) or {}
    return {k: normalize(v) for k, v in (goal.get("fail_info") or {}).items() if normalize(v)}


def search_cause(env: ToolWOZEnv, task: Task, name: str, arguments: Any, recorded: list, served: Any) -> str:
    """Why a search served another row than the authors' (what josh's own tables and the task plan say)."""
    checked = validate(name, arguments)
    if isinstance(checked, Rejection):
        return "other"
    domain = checked.spec.domain
    table = env.db.tables[domain]
    plan = TaskPlan.compile(task, env.db).domains.get(domain)
    query = table.compile(checked.args)
    if plan is not None and plan.fail_only and is_subset(plan.fail_only, checked.args):
        return "a fail_info search: josh serves nothing (spec 5), the authors' filter was a no-op"
    if query.impossible:
        return "a time josh cannot read ('before', '0900-0930'; HH:MM:SS now reads as HH:MM): josh matches no row"
    goal = plan.searches[0] if plan is not None and plan.searches else None
    entity_rows = table.rows_with_key(plan.entity) if plan is not None and plan.entity else ()
    if not served and plan is not None and plan.entity and not entity_rows:
        return "the task's booked entity is not in josh's DB (named otherwise): josh serves nothing"
    if not served and goal is not None and entity_rows and not any(r in goal.rows for r in entity_rows):
        return "the task's booked entity breaks its own search goal: josh serves nothing"
    if not served and goal is not None and is_subset(goal.constraints, checked.args) and plan.bookings:
        return "goal in the arguments, booked entity outside them, every match fits the goal: josh serves nothing"
    if not recorded:
        row = served[0] if served else {}
        if query.timed:
            return "train times: josh keeps rows at the bound, the authors' query was strict"
        if "'" in str(row.get("name", "")) and "name" in checked.args:
            return "a name with an apostrophe: the authors' lookup never matched it (spec 3)"
        fail = _fail_info(task, domain)
        if fail and all(normalize(row.get(k, "")) == v for k, v in fail.items()):
            return "the authors' DB had the fail_info rows removed at reset"
        if any(is_no_constraint(v) and normalize(v) for v in arguments.values() if isinstance(v, str)):
            return "a 'no constraint' word ('any', 'dontcare'): josh drops it, the authors matched it literally"
        return "other"
    theirs = table.rows_with_key(normalize(str(recorded[0].get(table.key, ""))))
    if not theirs:
        return "the authors' row is not in josh's DB"
    if not any(table.matches(r, query) for r in theirs):
        if query.timed:
            return "train times: the authors' row breaks josh's at-or-after / at-or-before bound (spec 4)"
        return "the authors' row does not match the normalised arguments"
    if plan is None or not plan.has_goal:
        return "no goal in the domain: josh serves the first match, the authors another"
    return "adversarial serving: another matching row chosen"


def repaired(task: Task, name: Any) -> str | None:
    """The repair josh made to the call's domain of ``task`` (``details.repairs``), if any."""
    domain = str(name).partition("_")[2]
    return (task.details.get("repairs") or {}).get(domain)


REPAIRED = (
    "the task's {} entity was repaired (details.repairs): josh serves the repaired goal, the authors the original"
)


def call_type(name: Any, recorded: Any) -> str:
    return "invalid (authors' env rejected)" if isinstance(recorded, str) else str(name)


def replay_node(env: ToolWOZEnv, state: ConversationState, messages: list, tally: Tally, task: Task) -> None:
    """Replay one node's calls on ``state``: each APICALL output with the results that answered it."""
    for i, message in enumerate(messages):
        if message.role != "assistant" or i + 1 >= len(messages):
            continue
        results = REACT.result_texts(messages[i + 1].content or "")
        if results is None:
            continue
        for read, result in zip(authors_calls(message.content or ""), results, strict=False):
            name, params = read if read is not None else ("", {})
            arguments = params if isinstance(params, dict) else json.dumps(params)
            served = env.call(state, ToolCall(name=name if isinstance(name, str) else "", arguments=arguments))
            recorded = _loads(result)
            kind = call_type(name, recorded)
            tally.calls[kind] += 1
            why = verdict(recorded, served)
            if why is None:
                tally.agree[kind] += 1
                continue
            if why.startswith("search:"):
                cause = search_cause(env, task, name, arguments, recorded, _loads(served.content))
                if cause == "other" and repaired(task, name):
                    cause = REPAIRED.format(str(name).partition("_")[2])
                why = f"{why} ({cause})"
            elif why.startswith("booking:") and repaired(task, name):
                why = f"{why} ({REPAIRED.format(str(name).partition('_')[2])})"
            elif why.startswith("booking:") and any(not isinstance(v, str) for v in dict(arguments or {}).values()):
                why = f"{why} (a number, not a string: josh normalises it, spec 2)"
            elif why.startswith("josh rejects"):
                why = f"{why}: a value of {_loads(served.content).get('message', '').split('=')[0]}"
            tally.kinds[(kind, why)] += 1
            if len(tally.shown[(kind, why)]) < tally.examples:
                tally.shown[(kind, why)].append(
                    f"{task.id} {json.dumps(arguments)[:160]}\n      authors: {result[:200]}\n      josh:    "
                    f"{served.content[:200]}"
                )


def replay_tree(env: ToolWOZEnv, tree: Tree, task: Task, reached: bool, tally: Tally) -> None:
    """Every node on a fork of its parent's state; josh's reward on the ideal path against ``reached``."""
    states = {0: env.reset(task)}
    for node in tree.nodes[1:]:
        state = states[node.parent or 0].fork()
        replay_node(env, state, node.messages, tally, task)
        states[node.id] = state
    final = states[tree.ideal_path()[-1].id]
    success = is_success(env.reward(final, []))
    tally.rewards[(reached, success)] += 1
    if reached == success:
        return
    causes = [unmet_cause(env, final, i) for i in range(len(task.goals)) if i not in final.completed]
    for cause in causes or ["josh completed every goal, the authors' env did not credit them all"]:
        tally.unmet[cause] += 1
        if len(tally.unmet_shown[cause]) < tally.examples:
            tally.unmet_shown[cause].append(task.id)


def unmet_cause(env: ToolWOZEnv, state: ConversationState, index: int) -> str:
    """Why a goal the authors' tree reached is not met under josh."""
    task = state.task
    goal = task.goals[index]
    wanted = normalize_args(goal.parameters)
    tried = [r for r in state.log if r.name == goal.name and isinstance(r.arguments, dict)]
    if any(r.error and is_subset(wanted, normalize_args(r.arguments)) for r in tried):
        return f"{goal.name} unmet: josh refused a call holding the goal (extra argument or enum value), the authors credited it"
    domain = goal.name.split("_", 1)[1]
    plan = TaskPlan.compile(task, env.db).domains.get(domain)
    table = env.db.tables.get(domain)
    search = plan.searches[0] if plan is not None and plan.searches else None
    if plan is not None and plan.entity and table is not None and not table.rows_with_key(plan.entity):
        return f"{goal.name} unmet: the booked entity is not in josh's DB (named otherwise; unsolvable in josh)"
    entity_rows = table.rows_with_key(plan.entity) if plan is not None and plan.entity and table is not None else ()
    if search is not None and entity_rows and not any(r in search.rows for r in entity_rows):
        return f"{goal.name} unmet: the booked entity breaks the task's own search goal (unsolvable in josh)"
    return f"{goal.name} unmet on the ideal path"


def report(tally: Tally, seconds: float, load: tuple[float, ...]) -> None:
    total, agree = sum(tally.calls.values()), sum(tally.agree.values())
    print(f"\n{total} calls replayed in {seconds:.1f} s; {agree / total:.1%} agree with the recorded APIRETURN")
    print(f"{'call type':40} {'calls':>7} {'agree':>7}")
    for kind, count in sorted(tally.calls.items()):
        print(f"{kind:40} {count:>7} {tally.agree[kind] / count:>7.1%}")
    trees = sum(tally.rewards.values())
    same = tally.rewards[(True, True)] + tally.rewards[(False, False)]
    print(f"\nfull reward: josh agrees with 100_percent_reached on {same}/{trees} trees ({same / trees:.1%})")
    for (theirs, ours), count in sorted(tally.rewards.items()):
        print(f"  authors {'100%' if theirs else '<100%':>5}  josh {'1.0' if ours else '<1.0':>4}: {count}")
    print(f"  trees without a josh task: {tally.missing_tasks}")
    for cause, count in tally.unmet.most_common():
        print(f"  {count:>4}  {cause}: {' '.join(tally.unmet_shown[cause])}")
    print("\ndisagreements by kind")
    for (kind, why), count in tally.kinds.most_common():
        print(f"  {count:>6}  {kind}: {why}")
        for example in tally.shown[(kind, why)]:
            print(f"      {example}")
    print(f"\nload average (1, 5, 15 min): before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after", end=" ")
    print(" ".join(f"{x:.2f}" for x in os.getloadavg()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wheel", help="the josh-train 0.1.4 wheel (pip download --no-deps josh-train==0.1.4)")
    parser.add_argument("--examples", type=int, default=3, help="examples shown per kind of disagreement")
    args = parser.parse_args()
    load = os.getloadavg()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        data = load_toolwoz(unpack_toolwoz(args.wheel, folder))
        tasks = {t.id: t for split in data.splits.values() for t in split}
        env = ToolWOZEnv(data.db_dir)
    rollouts = read_rollouts(args.wheel)
    frame = agent_prompt("react", env).frame(Task(id="paper", env="toolwoz"))
    print(f"{len(tasks)} tasks, {len(rollouts)} rollouts loaded in {time.perf_counter() - start:.1f} s")
    tally = Tally(examples=args.examples)
    start = time.perf_counter()
    for rollout in rollouts:
        task = tasks.get(rollout.dialogue_id)
        if task is None:
            tally.missing_tasks += 1
            continue
        replay_tree(env, rollout_tree(rollout, frame, ConvertStats()), task, rollout.reached_100, tally)
    report(tally, time.perf_counter() - start, load)


if __name__ == "__main__":
    main()
