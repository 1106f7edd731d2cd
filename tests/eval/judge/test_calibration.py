"""``josh judge --calibrate``: a judge that answers from the labels agrees perfectly, one that answers the same every
time agrees only by chance (kappa 0), and the rule-based backend check is scored beside them."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs.toolwoz.policy import POLICY
from josh.eval.judge.calibration import GOOD_AT, agreement, calibrate_llm, load_calibration
from josh.eval.judge.grounding import ungrounded
from josh.eval.judge.rubric import DIMENSIONS
from josh.llm.scripted import ScriptedLLM

ITEMS = load_calibration()


def from_labels(messages, _tools, _index) -> str:
    """A judge that reads the reply and answers its human labels (5 for good, 1 for bad)."""
    reply = messages[-1].content.split("REPLY TO GRADE: ", 1)[1].split("\n\nDOMAIN POLICY:", 1)[0]
    [item] = [i for i in ITEMS if i.reply == reply]
    return json.dumps({n: {"score": 5 if v == "good" else 1, "why": item.kind} for n, v in item.labels.items()})


def run(llm: ScriptedLLM) -> object:
    return asyncio.run(calibrate_llm(llm, judge="scripted:x", items=ITEMS, policy=POLICY))


def test_the_set_covers_every_kind_and_dimension() -> None:
    assert len(ITEMS) >= 30 and len({i.id for i in ITEMS}) == len(ITEMS)
    assert {i.kind for i in ITEMS} >= {"good", "invented", "premature booking", "off-topic"}
    for name in DIMENSIONS:
        labels = [i.labels[name] for i in ITEMS]
        assert "good" in labels and "bad" in labels
    assert all(i.messages() or i.kind == "good" for i in ITEMS)


def test_a_judge_answering_from_the_labels_agrees_perfectly() -> None:
    report = run(ScriptedLLM(from_labels))
    assert report.failed == 0 and report.items == len(ITEMS)
    for a in report.agreement.values():
        assert (a.n, a.accuracy, a.kappa) == (len(ITEMS), 1.0, 1.0)


@pytest.mark.parametrize("score", [1, 5])
def test_a_constant_judge_agrees_by_chance_only(score: int) -> None:
    answer = json.dumps({n: {"score": score, "why": "same"} for n in DIMENSIONS})
    report = run(ScriptedLLM([answer]))
    for name, a in report.agreement.items():
        good = sum(i.labels[name] == "good" for i in ITEMS) / len(ITEMS)
        assert a.accuracy == pytest.approx(good if score >= GOOD_AT else 1 - good)
        assert a.kappa == pytest.approx(0.0)


def test_failed_judgements_are_counted_and_left_out() -> None:
    report = run(ScriptedLLM(["not json"]))
    assert report.failed == len(ITEMS) and all(a.n == 0 and a.accuracy is None for a in report.agreement.values())


def test_the_rule_check_is_scored_against_the_backend_labels() -> None:
    report = run(ScriptedLLM(from_labels))
    expected = [(not ungrounded(i.messages(), i.reply), i.labels["backend"] == "good") for i in ITEMS]
    assert report.rule == agreement(expected) and report.rule.n == len(ITEMS)
    assert report.rule.accuracy is not None and report.rule.accuracy > 0.5


def test_kappa_by_hand() -> None:
    pairs = [(True, True), (True, False), (False, False), (False, False)]
    a = agreement(pairs)
    assert a.accuracy == 0.75 and a.kappa == pytest.approx(0.5)  # chance 0.5*0.25 + 0.5*0.75 = 0.5
    assert agreement([(True, True)]).kappa is None and agreement([]).accuracy is None


def test_the_rule_flags_invented_entities_and_passes_returned_ones() -> None:
    from josh.types import tool_result, user

    context = [user("a train on monday after 07:00"), tool_result("c1", '[{"trainID": "TR7293", "leaveAt": "07:20"}]')]
    assert ungrounded(context, "Train TR7293 leaves at 07:20.") == []
    assert ungrounded(context, "Train TR7293 leaves at 07:20 and costs 12.50 pounds.") == ["12.50"]
    assert ungrounded(context, "Sure. The Siam Palace has one.") == ["Siam Palace"]


def test_josh_judge_calibrate_prints_the_agreement() -> None:
    answer = json.dumps({n: {"score": 5, "why": "same"} for n in DIMENSIONS})
    args = ["judge", "--calibrate", "--judge", "scripted:smollm2", "--judge-option", f"replies={json.dumps([answer])}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Cohen's kappa" in result.output and "rule: entities" in result.output and "cohesion" in result.output
