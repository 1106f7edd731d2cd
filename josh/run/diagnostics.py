"""Per-call diagnostics: where an agent's tool calls go wrong, measured against the task's goals.

Every call the environment ran is given one class, in this order of precedence:

* ``correct``: it completed a goal (the environment's own verdict);
* ``malformed``: its arguments were not a JSON object;
* ``wrong_tool``: an unknown tool, or a tool that can complete goals (a write tool in τ-bench, any tool in
  ToolWOZ) but is not the tool of any of this task's goals;
* ``after_goal_met``: the tool of a goal, aimed at (closest to) a goal that was already completed;
* ``repeated``: the same tool with the same arguments as an earlier call;
* ``expected_failure``: a call the task says fails by design (``Env.expected_failures``; ToolWOZ: a search with
  the ``fail_info`` values its user asks for first, a booking with its ``fail_book`` slots), argument for argument;
* ``wrong_arguments``: the tool of a goal, with arguments that differ from the closest unmet goal's: each
  argument is ``wrong`` (another value), ``missing`` (the goal has it, the call does not) or ``invented`` (the call
  has it, the goal does not);
* ``support``: any other call (a lookup, a calculation, a transfer) made for the first time.

A goal that stays unmet and that no call aimed at is ``never attempted``. Values are compared loosely (strings
case- and space-insensitively, numbers as numbers), so a diagnosis names the arguments that matter. A conversation
also records the successes its agent claimed that did not happen (``josh.envs.claims``): a booking or change claimed
while no write succeeded, something found while every lookup came back empty.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

from josh.core.env import Env
from josh.envs.claims import false_claims
from josh.types import CallRecord, ErrorCategory, Goal, Task


class CallClass(str, Enum):
    CORRECT = "correct"
    MALFORMED = "malformed"
    WRONG_TOOL = "wrong_tool"
    AFTER_GOAL_MET = "after_goal_met"
    REPEATED = "repeated"
    EXPECTED_FAILURE = "expected_failure"
    WRONG_ARGUMENTS = "wrong_arguments"
    SUPPORT = "support"


class ArgumentIssue(str, Enum):
    WRONG = "wrong"
    MISSING = "missing"
    INVENTED = "invented"


class CallVerdict(BaseModel):
    """One call's class; ``goal`` is the goal it completed or aimed at, ``arguments`` what was wrong with it."""

    name: str
    verdict: CallClass
    goal: int | None = None
    arguments: dict[str, ArgumentIssue] = Field(default_factory=dict)


class Diagnosis(BaseModel):
    """The diagnostics of one conversation: a verdict per call, the tools of the goals never attempted, and the
    kinds of success the agent claimed that did not happen (``booked``, ``found``)."""

    calls: list[CallVerdict] = Field(default_factory=list)
    never_attempted: list[str] = Field(default_factory=list)
    false_claims: list[str] = Field(default_factory=list)


def loose(value: Any) -> Any:
    """A comparable, hashable form of a JSON value: strings case- and space-folded, numbers as floats, lists as
    tuples, objects as sorted (key, value) tuples."""
    if isinstance(value, str):
        return " ".join(value.casefold().split())
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return tuple(loose(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), loose(v)) for k, v in value.items()))
    return repr(value)


def argument_issues(arguments: dict[str, Any], goal: dict[str, Any]) -> dict[str, ArgumentIssue]:
    """What differs between a call's arguments and a goal's parameters, argument by argument."""
    issues = {key: ArgumentIssue.MISSING for key in goal if key not in arguments}
    issues.update({key: ArgumentIssue.INVENTED for key in arguments if key not in goal})
    issues.update(
        {key: ArgumentIssue.WRONG for key in goal if key in arguments and loose(arguments[key]) != loose(goal[key])}
    )
    return dict(sorted(issues.items()))


def _closest(goals: Sequence[Goal], name: str, arguments: dict[str, Any], met: set[int]) -> tuple[int, dict]:
    """The goal of this tool with the fewest argument differences (ties: an unmet goal, then the first)."""
    scored = [
        (len(issues), i in met, i, issues)
        for i, goal in enumerate(goals)
        if goal.name == name
        for issues in [argument_issues(arguments, goal.parameters)]
    ]
    _, _, index, issues = min(scored, key=lambda s: s[:3])
    return index, issues


def _verdict_of(name: str, verdict: CallClass, goal: int | None = None, arguments: dict | None = None) -> CallVerdict:
    """A verdict built without validation (its fields are right by construction; this runs for every call)."""
    return CallVerdict.model_construct(name=name, verdict=verdict, goal=goal, arguments=arguments or {})


def _verdict(
    goals: Sequence[Goal],
    record: CallRecord,
    met: set[int],
    repeated: bool,
    goal_tools: Collection[str] | None,
    expected: Collection[tuple[str, Any]],
) -> CallVerdict:
    """The class of one call; ``repeated``: an earlier call had the same tool and arguments; ``expected``: the
    (tool, loose arguments) of the calls the task says fail by design."""
    name = record.name
    if record.completed_goals:
        return _verdict_of(name, CallClass.CORRECT, goal=record.completed_goals[0])
    if not isinstance(record.arguments, dict):
        return _verdict_of(name, CallClass.MALFORMED)
    if not any(goal.name == name for goal in goals):
        if record.error == ErrorCategory.UNKNOWN_TOOL or goal_tools is None or name in goal_tools:
            return _verdict_of(name, CallClass.WRONG_TOOL)
        return _verdict_of(name, CallClass.REPEATED if repeated else CallClass.SUPPORT)
    index, issues = _closest(goals, name, record.arguments, met)
    if index in met:
        return _verdict_of(name, CallClass.AFTER_GOAL_MET, goal=index)
    if repeated:
        return _verdict_of(name, CallClass.REPEATED, goal=index)
    if (name, loose(record.arguments)) in expected:
        return _verdict_of(name, CallClass.EXPECTED_FAILURE, goal=index)
    return _verdict_of(name, CallClass.WRONG_ARGUMENTS, goal=index, arguments=issues)


def classify(
    goals: Sequence[Goal],
    log: Sequence[CallRecord],
    goal_tools: Collection[str] | None = None,
    expected_failures: Sequence[Goal] = (),
) -> list[CallVerdict]:
    """A verdict for every call of ``log`` (in order). ``goal_tools`` names the tools that can complete goals in
    this environment (``None``: every tool can); ``expected_failures`` the calls the task says fail by design."""
    expected = {(goal.name, loose(goal.parameters)) for goal in expected_failures}
    met: set[int] = set()
    seen: set[tuple[str, Any]] = set()
    verdicts = []
    for record in log:
        key = (record.name, loose(record.arguments)) if isinstance(record.arguments, dict) else None
        verdicts.append(_verdict(goals, record, met, key in seen, goal_tools, expected))
        met.update(record.completed_goals)
        if key is not None:
            seen.add(key)
    return verdicts


def diagnose(
    goals: Sequence[Goal],
    log: Sequence[CallRecord],
    goal_tools: Collection[str] | None = None,
    *,
    replies: Sequence[str] = (),
    write_tools: Collection[str] = (),
    expected_failures: Sequence[Goal] = (),
) -> Diagnosis:
    """Verdicts for every call, the tools of the goals that stayed unmet with no call aimed at them, and the false
    success claims among the agent's spoken ``replies`` (``write_tools``: the tools whose success is a booking)."""
    verdicts = classify(goals, log, goal_tools, expected_failures)
    met = {g for record in log for g in record.completed_goals}
    aimed = {v.goal for v in verdicts if v.goal is not None and v.verdict != CallClass.EXPECTED_FAILURE}
    never = [goal.name for i, goal in enumerate(goals) if i not in met and i not in aimed]
    return Diagnosis(calls=verdicts, never_attempted=never, false_claims=false_claims(replies, log, write_tools))


def goal_tools_of(env: Env) -> frozenset[str] | None:
    """The environment's ``goal_tools`` (the tools that can complete goals), or ``None`` when every tool can."""
    return frozenset(env.goal_tools) if env.goal_tools is not None else None


def diagnose_conversation(env: Env, task: Task, log: Sequence[CallRecord], replies: Sequence[str]) -> Diagnosis:
    """``diagnose`` of ``task``'s goals with the environment's goal tools, write tools and the task's expected
    failures."""
    return diagnose(
        task.goals,
        log,
        goal_tools_of(env),
        replies=replies,
        write_tools=env.write_tools,
        expected_failures=env.expected_failures(task),
    )


class DiagnosticsSummary(BaseModel):
    """Diagnostics over a run: call classes overall, per tool, argument issues per tool and argument, and goals
    never attempted per tool."""

    conversations: int = 0
    calls: int = 0
    by_class: dict[str, int] = Field(default_factory=dict)
    by_tool: dict[str, dict[str, int]] = Field(default_factory=dict)
    by_argument: dict[str, dict[str, dict[str, int]]] = Field(default_factory=dict)
    never_attempted: dict[str, int] = Field(default_factory=dict)
    false_claims: dict[str, int] = Field(default_factory=dict, description="conversations per falsely claimed kind")
    claimed_without_success: int = Field(0, description="conversations with any false success claim")


def summarize_diagnoses(diagnoses: Iterable[Diagnosis | None]) -> DiagnosticsSummary:
    """Add up the diagnoses of many conversations (``None`` entries, from older records, are skipped)."""
    by_class: Counter[str] = Counter()
    by_tool: dict[str, Counter[str]] = defaultdict(Counter)
    by_argument: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    never: Counter[str] = Counter()
    claimed: Counter[str] = Counter()
    conversations = claimed_any = 0
    for diagnosis in diagnoses:
        if diagnosis is None:
            continue
        conversations += 1
        claimed.update(diagnosis.false_claims)
        claimed_any += bool(diagnosis.false_claims)
        never.update(diagnosis.never_attempted)
        for call in diagnosis.calls:
            by_class[call.verdict.value] += 1
            by_tool[call.name][call.verdict.value] += 1
            for argument, issue in call.arguments.items():
                by_argument[call.name][argument][issue.value] += 1
    return DiagnosticsSummary(
        conversations=conversations,
        calls=sum(by_class.values()),
        by_class=dict(by_class),
        by_tool={tool: dict(counts) for tool, counts in sorted(by_tool.items())},
        by_argument={
            tool: {arg: dict(counts) for arg, counts in sorted(args.items())}
            for tool, args in sorted(by_argument.items())
        },
        never_attempted=dict(sorted(never.items())),
        false_claims=dict(sorted(claimed.items())),
        claimed_without_success=claimed_any,
    )


CLASS_LABELS = {
    CallClass.CORRECT: "correct",
    CallClass.WRONG_ARGUMENTS: "wrong args",
    CallClass.WRONG_TOOL: "wrong tool",
    CallClass.REPEATED: "repeated",
    CallClass.AFTER_GOAL_MET: "after goal met",
    CallClass.SUPPORT: "support",
    CallClass.EXPECTED_FAILURE: "expected to fail",
    CallClass.MALFORMED: "malformed",
}


def _breakdown(counts: dict[str, int]) -> str:
    """``2 correct, 1 wrong args`` in the order of ``CLASS_LABELS``, non-zero classes only."""
    return ", ".join(f"{counts[c.value]} {label}" for c, label in CLASS_LABELS.items() if counts.get(c.value))


def tool_rows(summary: DiagnosticsSummary) -> list[list[str]]:
    """Per tool: calls, their classes, and goals of that tool never attempted; a total row last."""
    tools = sorted(set(summary.by_tool) | set(summary.never_attempted))
    rows = []
    for tool in [*tools, None]:
        counts = summary.by_tool.get(tool, {}) if tool else summary.by_class
        never = summary.never_attempted.get(tool, 0) if tool else sum(summary.never_attempted.values())
        rows.append([tool or "all tools", str(sum(counts.values())), _breakdown(counts) or "-", str(never)])
    return rows


def _argument_items(summary: DiagnosticsSummary) -> list[tuple[str, str, dict[str, int]]]:
    """(tool, argument, issue counts), the most frequent first."""
    items = [(tool, arg, counts) for tool, args in summary.by_argument.items() for arg, counts in args.items()]
    return sorted(items, key=lambda item: (-sum(item[2].values()), item[0], item[1]))


def _issues(counts: dict[str, int]) -> str:
    return ", ".join(f"{issue.value} {counts[issue.value]}" for issue in ArgumentIssue if counts.get(issue.value))


def argument_rows(summary: DiagnosticsSummary) -> list[list[str]]:
    """Per tool and argument, how often it was wrong, missing or invented (most often first)."""
    return [[tool, arg, _issues(counts)] for tool, arg, counts in _argument_items(summary)]


TOOL_TABLE = ("tool calls against the goals", ("tool", "calls", "classes", "unattempted goals"))
"""The title and columns of the per-tool table ``josh eval`` prints."""
ARGUMENT_TABLE = ("arguments of calls with the right tool", ("tool", "argument", "issues"))
"""The title and columns of the per-argument table ``josh eval`` prints."""


def print_diagnostics(summary: DiagnosticsSummary | None, console: Console | None = None) -> None:
    """The per-tool and per-argument tables on the terminal (nothing when no call was made)."""
    if summary is None or (not summary.calls and not summary.never_attempted):
        return
    console = console or Console()
    tables = ((*TOOL_TABLE, tool_rows(summary)), (*ARGUMENT_TABLE, argument_rows(summary)))
    for title, header, rows in tables:
        if rows:
            table = Table(title=title)
            for column in header:
                numeric = column in ("calls", "unattempted goals")
                table.add_column(column, justify="right" if numeric else "left", no_wrap=column == "tool")
            for row in rows:
                table.add_row(*row)
            console.print(table)
    console.print(claims_line(summary))


def claims_line(summary: DiagnosticsSummary) -> str:
    """``claimed success that did not happen: 2 of 20 conversations (booked 2)``."""
    kinds = ", ".join(f"{kind} {n}" for kind, n in summary.false_claims.items())
    share = f"{summary.claimed_without_success} of {summary.conversations} conversations"
    return f"claimed success that did not happen: {share}" + (f" ({kinds})" if kinds else "")


def markdown_section(models: Sequence[tuple[str, DiagnosticsSummary | None]]) -> list[str]:
    """Markdown lines: one row per evaluated model with its call classes and most frequent argument issues."""
    found = [(label, d) for label, d in models if d is not None and (d.calls or d.never_attempted)]
    if not found:
        return []
    header = ["model", "calls", *CLASS_LABELS.values(), "goals never attempted", "claimed success that did not happen"]
    header.append("most frequent argument issues")
    lines = [
        "## Tool calls against the goals",
        "",
        "Every agent tool call classified against its task's goals (`summary.json` holds the breakdown per tool "
        "and per argument).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    for label, d in found:
        top = "; ".join(f"{tool}.{arg} {_issues(counts)}" for tool, arg, counts in _argument_items(d)[:3])
        cells = [label, str(d.calls), *(str(d.by_class.get(c.value, 0)) for c in CLASS_LABELS)]
        claimed = f"{d.claimed_without_success} of {d.conversations}"
        lines.append("| " + " | ".join([*cells, str(sum(d.never_attempted.values())), claimed, top or "-"]) + " |")
    return [*lines, ""]
