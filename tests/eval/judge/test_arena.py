"""``josh arena`` end to end with a scripted judge over fake evaluation folders: every ordered pair judged on the
shared conversations, both orders recorded, a known order recovered, a rerun judging only what is missing or failed;
and the pieces: the judge's prompt and grammar, reading its verdict, labelling the runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from josh.cli.main import app
from josh.eval.judge.arena import arena_grammar, arena_messages, load_runs, parse_verdict, run_labels
from josh.eval.judge.arena_runner import load_arena_judgements
from josh.eval.judge.parse import JudgeOutputError
from josh.llm.scripted import ScriptedLLM
from josh.run.conversation import ConversationRecord
from josh.types import ToolCall, assistant, tool_result, user

QUALITY = {"best": 3, "good": 2, "poor": 1}


def conversation(task_id: str, trial: int, word: str) -> ConversationRecord:
    call = assistant(calls=[ToolCall(name="find_restaurant", arguments={"food": "thai"})])
    messages = [
        user("A thai place, please."),
        call,
        tool_result(call.tool_calls[0].id, '{"name": "bangkok city"}'),
        assistant(f"the {word} reply: Bangkok City."),
    ]
    return ConversationRecord(
        task_id=task_id, trial=trial, reward=1.0, goal_reward=1.0, success=True, n_goals=1, end_reason="user_done",
        messages=messages,
    )  # fmt: skip


def make_run(folder: Path, word: str, tasks: list[str], *, trials: int = 1, env: str = "toolwoz") -> Path:
    folder.mkdir(parents=True)
    lines = [conversation(t, k, word).model_dump_json() for t in tasks for k in range(trials)]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "summary.json").write_text(json.dumps({"run": {"env": env, "data": "mini", "split": "test"}}))
    return folder


def verdict(winner: str) -> str:
    return json.dumps({"winner": winner, "why": "one sentence"})


def by_quality(messages, _tools, _index) -> str:
    """A judge that prefers the better word, whichever side it is on."""
    text = messages[1].content
    a, b = (re.search(r"the (\w+) reply", part).group(1) for part in text.split("CONVERSATION B:"))
    return verdict("A" if QUALITY[a] > QUALITY[b] else "B" if QUALITY[b] > QUALITY[a] else "equal")


def arena(runs: list[Path], out: Path, replies: list[str] | None = None) -> object:
    args = ["arena", *map(str, runs), "--out", str(out), "--judge", "scripted:smollm2"]
    return CliRunner().invoke(app, args + ["--judge-option", f"replies={json.dumps(replies or [verdict('A')])}"])


@pytest.fixture
def quality_judge(monkeypatch: pytest.MonkeyPatch) -> ScriptedLLM:
    import josh.eval.judge.arena_runner as runner

    llm = ScriptedLLM(by_quality)
    monkeypatch.setattr(runner, "build_llms", lambda configs: dict.fromkeys(configs, llm))
    return llm


def test_a_known_order_is_recovered_from_both_orders_of_every_pair(tmp_path: Path, quality_judge: ScriptedLLM) -> None:
    tasks = ["t1", "t2", "t3", "t4"]
    runs = [make_run(tmp_path / word, word, tasks) for word in ("poor", "best", "good")]
    result = arena(runs, tmp_path / "arena")
    assert result.exit_code == 0, result.output
    judgements = load_arena_judgements(tmp_path / "arena")
    assert len(judgements) == len(quality_judge.requests) == 3 * 2 * len(tasks)
    keys = {j.key for j in judgements}
    assert all((t, k, b, a) in keys for t, k, a, b in keys)  # every pair in both orders
    assert all(j.winner == max(j.a, j.b, key=QUALITY.get) and j.why == "one sentence" for j in judgements)
    summary = json.loads((tmp_path / "arena" / "arena_summary.json").read_text())
    models = summary["models"]
    assert models["best"]["strength"]["mean"] > models["good"]["strength"]["mean"] > models["poor"]["strength"]["mean"]
    assert models["best"]["elo"] > models["good"]["elo"] > models["poor"]["elo"]
    assert (models["best"]["wins"], models["best"]["losses"], models["poor"]["wins"]) == (16, 0, 0)
    assert summary["both_orders"] == 12 and summary["order_disagreements"] == 0 and summary["failed"] == 0
    assert summary["llm_calls"] == 24 and summary["judge"] == "scripted:smollm2"
    assert summary["prompt_version"] == "josh-arena-1"
    assert (tmp_path / "arena" / "arena.png").stat().st_size > 0
    assert "Bradley-Terry" in result.output


def test_a_judge_that_always_prefers_the_first_place_disagrees_with_itself(tmp_path: Path) -> None:
    runs = [make_run(tmp_path / word, word, ["t1", "t2"]) for word in ("good", "poor")]
    result = arena(runs, tmp_path / "arena", [verdict("A")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "arena" / "arena_summary.json").read_text())
    assert summary["both_orders"] == 2 and summary["order_disagreements"] == 2
    good, poor = summary["models"]["good"], summary["models"]["poor"]
    assert good["strength"]["mean"] == pytest.approx(poor["strength"]["mean"]) and good["wins"] == good["losses"] == 2


def test_a_rerun_judges_only_what_failed_or_is_missing(tmp_path: Path) -> None:
    runs = [make_run(tmp_path / word, word, ["t1", "t2"]) for word in ("good", "poor")]
    out = tmp_path / "arena"
    first = arena(runs, out, ["I cannot tell.", verdict("B")])  # cycled: every other answer names no winner
    assert first.exit_code == 0, first.output
    summary = json.loads((out / "arena_summary.json").read_text())
    assert summary["judgements"] == 4 and summary["failed"] == 2
    assert sum(j.error is not None for j in load_arena_judgements(out)) == 2

    again = arena(runs, out, [verdict("equal")])
    assert again.exit_code == 0, again.output
    assert len(load_arena_judgements(out)) == 6  # the two failed pairs judged again, nothing else
    summary = json.loads((out / "arena_summary.json").read_text())
    assert summary["judgements"] == 4 and summary["failed"] == 0 and summary["llm_calls"] == 6

    lines = (out / "arena_judgements.jsonl").read_text().splitlines()
    (out / "arena_judgements.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:25])  # a write cut short
    resumed = arena(runs, out, [verdict("equal")])
    assert resumed.exit_code == 0, resumed.output
    assert len(load_arena_judgements(out)) == 6
    assert json.loads((out / "arena_summary.json").read_text())["failed"] == 0


def test_only_the_shared_conversations_are_compared_and_the_rest_counted(tmp_path: Path) -> None:
    one = make_run(tmp_path / "one", "good", ["t1", "t2", "t3"], trials=2)
    two = make_run(tmp_path / "two", "poor", ["t2", "t3", "t4"])
    result = arena([one, two], tmp_path / "arena")
    assert result.exit_code == 0, result.output
    assert "2 conversations (task, trial) shared by all 2 runs; not shared, skipped: one 4, two 1" in result.output
    summary = json.loads((tmp_path / "arena" / "arena_summary.json").read_text())
    assert summary["shared"] == 2 and summary["skipped"] == {"one": 4, "two": 1} and summary["judgements"] == 4
    assert {(j.task_id, j.trial) for j in load_arena_judgements(tmp_path / "arena")} == {("t2", 0), ("t3", 0)}


def test_runs_of_different_environments_are_one_clear_error(tmp_path: Path) -> None:
    one = make_run(tmp_path / "one", "good", ["t1"])
    two = make_run(tmp_path / "two", "poor", ["t1"], env="retail")
    result = arena([one, two], tmp_path / "arena")
    assert result.exit_code == 2 and "evaluated different environments or data" in result.output
    assert "one: toolwoz/mini, two: retail/mini" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "arena").exists()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("empty", "no conversations in"),
        ("no_summary", "names no environment"),
        ("disjoint", "share no (task, trial) conversation"),
        ("alone", "at least two run folders"),
    ],
)
def test_unusable_run_folders_are_one_clear_error(tmp_path: Path, setup: str, message: str) -> None:
    one = make_run(tmp_path / "one", "good", ["t1"])
    other = tmp_path / "other"
    if setup == "empty":
        other.mkdir()
    elif setup == "no_summary":
        make_run(other, "poor", ["t1"])
        (other / "summary.json").unlink()
    elif setup == "disjoint":
        make_run(other, "poor", ["t9"])
    result = arena([one] if setup == "alone" else [one, other], tmp_path / "arena")
    assert result.exit_code == 2 and message in result.output, result.output


def test_runs_are_labelled_by_the_shortest_path_ending_that_tells_them_apart(tmp_path: Path) -> None:
    assert run_labels([tmp_path / "a" / "eval", tmp_path / "b" / "eval"]) == ["a/eval", "b/eval"]
    assert run_labels([tmp_path / "sft", tmp_path / "base"]) == ["sft", "base"]
    with pytest.raises(ValueError, match="given twice"):
        run_labels([tmp_path / "sft", tmp_path / "x" / ".." / "sft"])
    runs = load_runs(
        [make_run(tmp_path / "a" / "eval", "good", ["t1"]), make_run(tmp_path / "b" / "eval", "x", ["t1"])]
    )
    assert [r.label for r in runs] == ["a/eval", "b/eval"]


def test_the_judge_reads_both_whole_conversations_and_the_policy() -> None:
    system, prompt = arena_messages(conversation("t", 0, "good"), conversation("t", 0, "poor"), "Ask before booking.")
    assert '"winner": "A" or "B" or "equal"' in system.content
    text = prompt.content
    assert text.index("CONVERSATION A:") < text.index("the good reply") < text.index("CONVERSATION B:")
    assert text.index("CONVERSATION B:") < text.index("the poor reply") < text.index("DOMAIN POLICY:\nAsk before")
    assert text.count('AGENT CALLS find_restaurant({"food": "thai"})') == 2
    assert text.count('TOOL RESULT: {"name": "bangkok city"}') == 2
    assert "DOMAIN POLICY" not in arena_messages(conversation("t", 0, "a"), conversation("t", 0, "b"), None)[1].content


def test_the_arena_grammar_compiles_for_llguidance() -> None:
    pytest.importorskip("llguidance")
    from josh.llm.hf_grammar import grammar_problem

    assert grammar_problem(arena_grammar()) is None


prose = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=40)


@given(st.sampled_from(["A", "B", "equal", " a ", "Tie", "EQUAL"]), st.text(max_size=30), prose, prose)
def test_a_well_formed_verdict_is_read_whatever_surrounds_it(winner: str, why: str, before: str, after: str) -> None:
    verdict_, reason = parse_verdict(before + json.dumps({"winner": winner, "why": why}) + after)
    assert verdict_ == {"a": "A", "b": "B", "tie": "equal"}.get(winner.strip().lower(), winner.strip().lower())
    assert reason == why[:300]


@given(st.text(max_size=200))
def test_any_text_is_a_verdict_or_a_judge_output_error(text: str) -> None:
    try:
        verdict_, _ = parse_verdict(text)
    except JudgeOutputError:
        return
    assert verdict_ in ("A", "B", "equal")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Conversation A is better.", "no JSON object"),
        ('{"why": "A was polite"}', "winner: missing"),
        ('{"winner": "C", "why": ""}', "'C' is not A, B or equal"),
        ('{"winner": 1}', "'1' is not A, B or equal"),
        ('{"winner": null}', "'None' is not A, B or equal"),
    ],
)
def test_a_verdict_without_a_winner_is_an_error_naming_why(text: str, message: str) -> None:
    with pytest.raises(JudgeOutputError, match=re.escape(message)):
        parse_verdict(text)
