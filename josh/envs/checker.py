"""``check_env``: proves an environment fit for search before anyone trusts its trees, in the spirit of Gymnasium's
environment checker (``josh check-env NAME`` prints its table; a plugin's own tests call it).

Checks, each timed: the contract (every ``Env`` member, ``josh.core.env``); the tool schemas (OpenAI function
schemas whose parameters are valid JSON Schema: ``jsonschema`` when installed, else a structural check); every split
loads; ``reset`` and ``call`` are deterministic; random fork trees, their calls interleaved across branches, equal a
fresh replay of each branch's calls (isolation: no per-branch field shared); hostile calls (fuzzed names and
arguments) never raise; every reward is a number in [0, 1]; the user side (``user_tools`` / ``user_call``) holds the
same; what each call reports agrees (its result, its log entry, the goals the state gained: ``agreement.py``). Calls are drawn from each task's goals, its gold actions and the tools' schemas, seeded (``checker_calls.py``).
"""

from __future__ import annotations

import functools
import importlib.util
import random
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from josh.core.env import IMPLEMENT, ConversationState, Env, missing_members
from josh.envs.agreement import FIX, disagreement
from josh.envs.checker_calls import Branch, gold_calls, hostile_calls, random_call, random_calls
from josh.types import Task, ToolCall, ToolResult


class Check(BaseModel):
    """One check's outcome: its name, whether it passed, what it found, and its seconds."""

    name: str
    passed: bool
    detail: str
    seconds: float


class EnvCheckError(AssertionError):
    """An environment failed ``check_env``; the message names every failed check and its problem."""


class CheckReport(BaseModel):
    """Every check of one environment."""

    env: str
    checks: list[Check]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def seconds(self) -> float:
        return round(sum(c.seconds for c in self.checks), 3)

    def failures(self) -> str:
        return "; ".join(f"{c.name}: {c.detail}" for c in self.checks if not c.passed)


class _Failed(Exception):
    """A check found a problem (its message)."""


def check_env(
    env: Env,
    *,
    splits: Sequence[str] | None = None,
    tasks_per_split: int = 2,
    max_tasks: int = 2,
    steps: int = 24,
    rewarded: int = 2,
    seed: int = 0,
    raise_on_failure: bool = True,
) -> CheckReport:
    """Run every check on ``env`` over ``tasks_per_split`` tasks of each of ``splits`` (default: ``env.splits``; at
    most ``max_tasks`` in all, spread over the splits), ``steps`` calls per fork tree, the rewards of ``rewarded``
    branches per tree compared with their replays' (a reward can be slow: τ² replays the conversation);
    ``EnvCheckError`` naming the failed checks unless ``raise_on_failure`` is false."""
    name = str(getattr(env, "name", type(env).__name__))  # the contract check below says when it is missing
    checks = [_timed("contract", lambda: _contract(env))]
    if not checks[0].passed:
        return _finish(CheckReport(env=name, checks=checks), raise_on_failure)
    loaded: list[Task] = []
    checks.append(_timed("splits load", lambda: _splits(env, splits or env.splits, tasks_per_split, loaded)))
    checks.append(_timed("tool schemas", lambda: _schemas(env)))
    rng = random.Random(seed)
    on_tasks: dict[str, Callable[[list[Task]], str]] = {
        "reset/call deterministic": lambda tasks: _deterministic(env, tasks, steps, rng),
        "fork isolation": lambda tasks: _isolation(env, tasks, steps, rng, rewarded),
        "hostile calls": lambda tasks: _hostile(env, tasks, env.tools, env.call, "call"),
        "rewards in [0, 1]": lambda tasks: _rewards(env, tasks, steps, rng),
        "user side": lambda tasks: _user_side(env, tasks),
        "reports agree": lambda tasks: _agree(env, tasks, steps, rng),
    }
    for check, run in on_tasks.items():
        if loaded:
            spread = loaded[:: max(1, len(loaded) // max_tasks)][:max_tasks]
            checks.append(_timed(check, functools.partial(run, spread)))
        else:
            checks.append(Check(name=check, passed=False, detail="no task loaded to check on", seconds=0.0))
    return _finish(CheckReport(env=name, checks=checks), raise_on_failure)


def _finish(report: CheckReport, raise_on_failure: bool) -> CheckReport:
    if raise_on_failure and not report.passed:
        raise EnvCheckError(f"environment {report.env!r} failed: {report.failures()}")
    return report


def _timed(name: str, run: Callable[[], str]) -> Check:
    start = time.perf_counter()
    try:
        passed, detail = True, run()
    except _Failed as exc:
        passed, detail = False, str(exc)
    except Exception as exc:  # a check that crashes is that check's failure, named with the crash
        passed, detail = False, f"raised {type(exc).__name__}: {exc}"
    return Check(name=name, passed=passed, detail=detail, seconds=round(time.perf_counter() - start, 3))


def _contract(env: Env) -> str:
    if missing := missing_members(env):
        raise _Failed(f"lacks {', '.join(missing)} ({IMPLEMENT})")
    if not isinstance(env.tools, list) or not env.tools:
        raise _Failed("tools must be a non-empty list of function schemas")
    return f"{len(env.tools)} tools"


def _splits(env: Env, splits: Sequence[str], per_split: int, loaded: list[Task]) -> str:
    counts = []
    for split in splits:
        tasks = env.tasks(split)
        if not tasks:
            raise _Failed(f"split {split!r} has no tasks")
        ids = [t.id for t in tasks]
        if len(set(ids)) != len(ids):
            raise _Failed(f"split {split!r} repeats task ids")
        if wrong := [t.id for t in tasks if t.env != env.name]:
            raise _Failed(f"split {split!r}: task {wrong[0]!r} names another env")
        loaded.extend(tasks[:per_split])
        counts.append(f"{split} {len(tasks)}")
    return ", ".join(counts)


def _schemas(env: Env) -> str:
    validate = _schema_validator()
    for side, tools in (("tools", env.tools), ("user_tools", env.user_tools or [])):
        names = []
        for i, tool in enumerate(tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict) or tool.get("type") != "function":
                raise _Failed(f"{side}[{i}] is not {{'type': 'function', 'function': {{...}}}}")
            name, parameters = function.get("name"), function.get("parameters", {"type": "object"})
            if not isinstance(name, str) or not name:
                raise _Failed(f"{side}[{i}] has no function name")
            if not isinstance(parameters, dict) or parameters.get("type") != "object":
                raise _Failed(f"{name}: parameters must be a JSON Schema of type object")
            if problem := validate(parameters):
                raise _Failed(f"{name}: {problem}")
            names.append(name)
        if len(set(names)) != len(names):
            raise _Failed(f"{side} repeat a name")
    how = "jsonschema" if importlib.util.find_spec("jsonschema") else "structural check"
    return f"{len(env.tools)} + {len(env.user_tools or [])} user ({how})"


def _schema_validator() -> Callable[[dict[str, Any]], str | None]:
    """A function naming what is wrong with a JSON Schema (``None``: nothing)."""
    if importlib.util.find_spec("jsonschema") is None:
        return _structural
    from jsonschema import SchemaError, validators  # optional: the structural check stands in without it

    def check(schema: dict[str, Any]) -> str | None:
        try:
            validators.validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            return f"invalid JSON Schema: {exc.message}"
        return _structural(schema)

    return check


def _structural(schema: dict[str, Any]) -> str | None:
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(p, dict) for p in properties.values()):
        return "properties must map names to schemas"
    required = schema.get("required", [])
    if not isinstance(required, list) or not set(required) <= set(properties):
        return f"required names {sorted(set(required) - set(properties))} that are not properties"
    return None


def _outcome(result: Any) -> tuple[Any, ...]:
    if not isinstance(result, ToolResult):
        raise _Failed(f"call returned {type(result).__name__}, not a ToolResult")
    return result.content, result.error, tuple(result.completed_goals)


def _snapshot(env: Env, state: ConversationState, reward: bool = True) -> tuple[Any, ...]:
    """What a branch shows: its log, completed goals, termination and (``reward``) its reward."""
    log = [(r.name, r.arguments, r.content, r.error, tuple(r.completed_goals)) for r in state.log]
    return log, sorted(state.completed), state.terminated, _reward(env, state) if reward else None


def _reward(env: Env, state: ConversationState) -> float:
    reward = env.reward(state, [])
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not 0.0 <= reward <= 1.0:
        raise _Failed(f"reward {reward!r} on task {state.task.id!r} is not a number in [0, 1]")
    return float(reward)


def _run(env: Env, state: ConversationState, call: ToolCall, user: bool = False) -> tuple[Any, ...]:
    return _outcome(_call(env, state, call, user))


def _call(env: Env, state: ConversationState, call: ToolCall, user: bool = False) -> ToolResult:
    run = env.user_call if user else env.call
    try:
        result = run(state, call)
    except Exception as exc:
        raise _Failed(f"{'user_call' if user else 'call'} raised {type(exc).__name__}: {exc} on {_show(call)}") from exc
    _outcome(result)
    return result


def _show(call: ToolCall) -> str:
    text = f"{call.name}({call.arguments!r})"
    return text if len(text) < 160 else text[:157] + "..."


def _replay(env: Env, task: Task, calls: Iterable[tuple[ToolCall, bool]]) -> tuple[list[tuple[Any, ...]], Any]:
    state = env.reset(task)
    outcomes = [_run(env, state, call, user) for call, user in calls]
    return outcomes, state


def _deterministic(env: Env, tasks: list[Task], steps: int, rng: random.Random) -> str:
    for task in tasks:
        if _snapshot(env, env.reset(task), False) != _snapshot(env, env.reset(task), False):
            raise _Failed(f"two resets of task {task.id!r} differ")
        calls = random_calls(env, task, steps, rng)
        a, state_a = _replay(env, task, calls)
        b, state_b = _replay(env, task, calls)
        if a != b or _snapshot(env, state_a) != _snapshot(env, state_b):
            at = next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), len(a))
            where = _show(calls[at][0]) if at < len(calls) else "the final state"
            raise _Failed(f"the same calls on task {task.id!r} gave different results at {where}")
    return f"{len(tasks)} tasks x {steps} calls, twice"


def _isolation(env: Env, tasks: list[Task], steps: int, rng: random.Random, rewarded: int) -> str:
    branches = 0
    for task in tasks:
        nodes: list[tuple[ConversationState, Branch, list[tuple[Any, ...]]]] = [(env.reset(task), [], [])]
        for call, user in random_calls(env, task, steps, rng):
            if rng.random() < 0.4:
                state, made, seen = rng.choice(nodes)
                nodes.append((state.fork(), list(made), list(seen)))
            state, made, seen = rng.choice(nodes)
            seen.append(_run(env, state, call, user))
            made.append((call, user))
        scored = {id(node[0]) for node in sorted(nodes, key=lambda n: -len(n[1]))[:rewarded]}
        for state, made, seen in nodes:
            fresh, fresh_state = _replay(env, task, made)
            reward = id(state) in scored
            if fresh != seen or _snapshot(env, fresh_state, reward) != _snapshot(env, state, reward):
                raise _Failed(
                    f"a branch of task {task.id!r} differs from a fresh replay of its {len(made)} calls: a fork "
                    f"shares per-branch state ({type(state).__name__}: declare the field in branch_fields, or copy "
                    "it in fork)"
                )
        branches += len(nodes)
    return f"{branches} branches of {len(tasks)} tasks equal their replays"


def _agree(env: Env, tasks: list[Task], steps: int, rng: random.Random) -> str:
    calls = 0
    for task in tasks:
        state = env.reset(task)
        for call in gold_calls(task) + [random_call(env, task, rng) for _ in range(steps)]:
            before, logged = set(state.completed), len(state.log)
            result = _call(env, state, call)
            if problem := disagreement(state, call, result, before, logged):
                raise _Failed(f"task {task.id!r}, {_show(call)}: {problem} ({FIX})")
            calls += 1
    return f"{calls} calls: result, log and completed goals agree"


def _hostile(
    env: Env, tasks: list[Task], tools: list[dict[str, Any]], run: Callable[[Any, ToolCall], Any], what: str
) -> str:
    calls = hostile_calls(tools)
    for task in tasks:
        root = env.reset(task)
        for call in calls:
            try:
                _outcome(run(root.fork(), call))
            except _Failed:
                raise
            except Exception as exc:
                raise _Failed(f"{what} raised {type(exc).__name__}: {exc} on {_show(call)}") from exc
    return f"{len(calls) * len(tasks)} fuzzed calls answered"


def _rewards(env: Env, tasks: list[Task], steps: int, rng: random.Random) -> str:
    seen = set()
    for task in tasks:
        state = env.reset(task)
        seen.add(_reward(env, state))
        for call in gold_calls(task) + [random_call(env, task, rng) for _ in range(steps // 2)]:
            _run(env, state, call)
        for ended in (None, "max_turns"):
            state.ended = ended
            seen.add(_reward(env, state))
    return f"seen {', '.join(f'{r:g}' for r in sorted(seen))}"


def _user_side(env: Env, tasks: list[Task]) -> str:
    if not env.user_tools:
        result = env.user_call(env.reset(tasks[0]), ToolCall(name="anything"))
        if not isinstance(result, ToolResult) or result.error is None:
            raise _Failed("no user_tools, yet user_call answered without an error")
        return "no user tools"
    return _hostile(env, tasks, env.user_tools, env.user_call, "user_call")
