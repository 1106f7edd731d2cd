"""Per-call diagnostics: the classes, their precedence, the run summary, the report, and the view's labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from typer.testing import CliRunner

from josh.agents.replay import ReplayAgent
from josh.cli.main import app
from josh.cli.view import render_tree
from josh.envs.airline import AirlineEnv
from josh.envs.taubench.user import TauScriptedUser
from josh.envs.toolwoz.agenda import AgendaUser
from josh.envs.toolwoz.oracle import OracleAgent
from josh.envs.toolwoz.task import details_of
from josh.eval.evaluate import evaluate
from josh.run.diagnostics import (
    ArgumentIssue,
    CallClass,
    Diagnosis,
    argument_issues,
    classify,
    diagnose,
    markdown_section,
    print_diagnostics,
    summarize_diagnoses,
)
from josh.search.algorithm import SearchConfig, search
from josh.types import CallRecord, ErrorCategory, Goal, ToolCall
from tests.airline_data import write_airline

GOALS = [
    Goal(name="cancel", parameters={"id": "A1"}),
    Goal(name="cancel", parameters={"id": "B2"}),
    Goal(name="book", parameters={"name": "Acorn House", "people": 2}),
    Goal(name="refund", parameters={"id": "C3"}),
]


def rec(name: str, arguments: Any, completed: tuple[int, ...] = (), error: ErrorCategory | None = None) -> CallRecord:
    return CallRecord(name=name, arguments=arguments, content="", error=error, completed_goals=completed)


def test_every_class_in_order_of_precedence() -> None:
    log = [
        rec("lookup", {"id": "A1"}),  # support
        rec("cancel", {"id": "A1"}, (0,)),  # correct
        rec("cancel", {"id": "A1"}),  # after goal met
        rec("lookup", {"id": "A1"}),  # repeated support call
        rec("book", {"name": "acorn  house", "people": 3, "day": "monday"}),  # wrong + invented
        rec("book", {"name": "acorn  house", "people": 3, "day": "monday"}),  # repeated
        rec("book", {"people": 2.0}),  # missing name; 2 == 2.0
        rec("teleport", {}, error=ErrorCategory.UNKNOWN_TOOL),  # wrong tool (unknown)
        rec("modify", {"id": "A1"}),  # wrong tool: it can complete goals, but none of this task's
        rec("cancel", "A1", error=ErrorCategory.MALFORMED),  # malformed
    ]
    verdicts = classify(GOALS, log, goal_tools={"cancel", "book", "refund", "modify"})
    assert [v.verdict for v in verdicts] == [
        CallClass.SUPPORT,
        CallClass.CORRECT,
        CallClass.AFTER_GOAL_MET,
        CallClass.REPEATED,
        CallClass.WRONG_ARGUMENTS,
        CallClass.REPEATED,
        CallClass.WRONG_ARGUMENTS,
        CallClass.WRONG_TOOL,
        CallClass.WRONG_TOOL,
        CallClass.MALFORMED,
    ]
    assert verdicts[1].goal == 0 and verdicts[2].goal == 0
    assert verdicts[4].arguments == {"day": ArgumentIssue.INVENTED, "people": ArgumentIssue.WRONG}
    assert verdicts[6].arguments == {"name": ArgumentIssue.MISSING}
    assert classify(GOALS, [rec("lookup", {})])[0].verdict == CallClass.WRONG_TOOL  # no goal_tools: every tool can


def test_a_call_the_task_says_fails_is_an_expected_failure_not_wrong_arguments() -> None:
    probe = Goal(name="book", parameters={"name": "Acorn House", "people": 9})
    log = [
        rec("book", {"name": "acorn house", "people": 9}),  # the task's own failing request, argument for argument
        rec("book", {"name": "acorn house", "people": 9}),  # asked again: repeated
        rec("book", {"name": "acorn house", "people": 8}),  # neither the probe nor the goal
    ]
    diagnosis = diagnose(GOALS, log, expected_failures=[probe])
    assert [v.verdict for v in diagnosis.calls] == [
        CallClass.EXPECTED_FAILURE,
        CallClass.REPEATED,
        CallClass.WRONG_ARGUMENTS,
    ]
    assert "book" in diagnose(GOALS, log[:1], expected_failures=[probe]).never_attempted  # a probe is no attempt


def test_calls_aim_at_the_closest_goal_and_unaimed_goals_are_never_attempted() -> None:
    log = [rec("cancel", {"id": "A1"}, (0,)), rec("cancel", {"id": "b2", "why": "x"})]
    diagnosis = diagnose(GOALS, log, goal_tools={"cancel", "book", "refund"})
    second = diagnosis.calls[1]
    assert (second.verdict, second.goal, second.arguments) == (
        CallClass.WRONG_ARGUMENTS,
        1,
        {"why": ArgumentIssue.INVENTED},
    )
    assert diagnosis.never_attempted == ["book", "refund"]
    assert argument_issues({"a": " X "}, {"a": "x", "b": 1}) == {"b": ArgumentIssue.MISSING}


def test_summary_counts_per_tool_and_argument() -> None:
    first = diagnose(GOALS, [rec("book", {"name": "x", "people": 2}), rec("cancel", {"id": "A1"}, (0,))])
    second = diagnose(GOALS, [rec("book", {"people": 1})])
    summary = summarize_diagnoses([first, second, None])
    assert summary.calls == 3 and summary.by_class == {"wrong_arguments": 2, "correct": 1}
    assert summary.by_tool["book"] == {"wrong_arguments": 2}
    assert summary.by_argument["book"] == {"name": {"wrong": 1, "missing": 1}, "people": {"wrong": 1}}
    assert summary.never_attempted == {"cancel": 3, "refund": 2}
    console = Console(record=True, width=200)
    print_diagnostics(summary, console)
    text = console.export_text()
    assert "tool calls against the goals" in text and "arguments of calls with the right tool" in text
    lines = markdown_section([("base", summary), ("empty", summarize_diagnoses([Diagnosis()]))])
    assert len([line for line in lines if line.startswith("| base")]) == 1 and not any("| empty" in x for x in lines)
    assert "book.name wrong 1, missing 1" in "\n".join(lines)


async def test_the_oracles_fail_info_probes_are_expected_failures_on_the_mini_set(mini_env, tmp_path: Path) -> None:
    tasks = mini_env.tasks("test")
    summary = await evaluate(mini_env, tasks, OracleAgent(mini_env), AgendaUser(), tmp_path)
    assert summary.diagnostics is not None and summary.average_reward.mean == 1.0
    assert summary.diagnostics.by_class.get("expected_failure", 0) > 0
    assert set(summary.diagnostics.by_class) == {"correct", "expected_failure"}  # a perfect agent looks perfect
    by_id = {task.id: task for task in tasks}
    for line in (tmp_path / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        probed = {
            c["name"].split("_", 1)[1] for c in record["diagnosis"]["calls"] if c["verdict"] == "expected_failure"
        }
        goal = details_of(by_id[record["task_id"]]).goal
        assert all(goal[domain].fail_info or goal[domain].fail_book for domain in probed)
    console = Console(record=True, width=200)
    print_diagnostics(summary.diagnostics, console)
    assert "expected to fail" in console.export_text() and "wrong args" not in console.export_text()


def airline_calls() -> list[ToolCall]:
    """Task 0 of the tiny data (goal: cancel BBB222), with one call of every kind on the way."""
    calls = [
        ("get_reservation_details", {"reservation_id": "BBB222"}),
        ("cancel_reservation", {"reservation_id": "AAA111"}),
        ("cancel_reservation", {"reservation_id": "BBB222"}),
        ("cancel_reservation", {"reservation_id": "BBB222"}),
        ("get_reservation_details", {"reservation_id": "BBB222"}),
        ("send_certificate", {"user_id": "ann_lee_1", "amount": 50}),
        ("upgrade_seat", {}),
    ]
    return [ToolCall(name=n, arguments=a, id=f"c{i}") for i, (n, a) in enumerate(calls)]


async def test_evaluation_summary_and_records_carry_the_diagnostics(tmp_path: Path) -> None:
    env = AirlineEnv(write_airline(tmp_path / "data"))
    tasks = env.tasks("test")[:1]
    summary = await evaluate(env, tasks, ReplayAgent(env, airline_calls()), TauScriptedUser(), tmp_path / "run")
    assert summary.diagnostics is not None
    assert summary.diagnostics.by_tool["cancel_reservation"] == {
        "wrong_arguments": 1,
        "correct": 1,
        "after_goal_met": 1,
    }
    assert summary.diagnostics.by_tool["get_reservation_details"] == {"support": 1, "repeated": 1}
    assert summary.diagnostics.by_class["wrong_tool"] == 2  # send_certificate (a write, not a goal) and upgrade_seat
    assert summary.diagnostics.by_argument == {"cancel_reservation": {"reservation_id": {"wrong": 1}}}
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["diagnostics"]["by_tool"]["cancel_reservation"]["correct"] == 1
    record = json.loads((tmp_path / "run" / "results.jsonl").read_text().splitlines()[0])
    assert [c["verdict"] for c in record["diagnosis"]["calls"]][:3] == ["support", "wrong_arguments", "correct"]


async def test_tree_nodes_and_the_view_show_each_calls_class(tmp_path: Path) -> None:
    env = AirlineEnv(write_airline(tmp_path / "data"))
    task = env.tasks("test")[0]
    agent = ReplayAgent(env, airline_calls()[:3], calls_per_turn=2)
    tree = await search(task, env, agent, TauScriptedUser(), SearchConfig(max_beam=2, branching=1))
    turns = [n for n in tree.nodes if n.calls]
    assert [v.verdict for v in turns[0].calls] == [CallClass.SUPPORT, CallClass.WRONG_ARGUMENTS]
    assert [v.verdict for v in turns[1].calls] == [CallClass.CORRECT]
    page = render_tree(tree)
    assert "wrong args: reservation_id wrong" in page and ">correct<" in page


def test_josh_eval_prints_the_breakdown(tmp_path: Path) -> None:
    data = str(write_airline(tmp_path / "data"))
    args = ["eval", "--env", "airline", "--data", data, "--agent", "replay", "--user", "retail_scripted"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "tool calls against the goals" in result.output and "cancel_reservation" in result.output
