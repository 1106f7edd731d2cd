"""The judge gate in the scripted loop: a scripted judge gates the round's ideal paths, and control-gate trains the
SFT arm again on the same trees without the gate, compared paired with JOSH-SFT in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from josh.loop.report import load_loop_report
from josh.loop.runner import Loop
from josh.util.layout import JUDGE_GATE
from tests.fakes.loop import RecordingTrainer, StubTrainer, builder, lines, merger
from tests.loop.plumbing import recipe  # a small held-out evaluation: no test here reads a score

LOW, HIGH = ({name: {"score": s, "why": "."} for name in ("cohesion", "backend", "policy")} for s in (1, 5))
GATE = {"backend": "scripted", "model": None, "llm_options": {"replies": [json.dumps(LOW)] + [json.dumps(HIGH)] * 5}}


def messages(rows: list[str]) -> list[list[dict]]:
    return [json.loads(row)["messages"] for row in rows]


def test_the_gated_loop_and_its_control(tmp_path: Path) -> None:
    trainer = RecordingTrainer()
    changes = {"kto": None, "extract": {"judge": {**GATE, "route": "kto"}}, "controls": {"gate": True}}
    result = Loop(recipe(tmp_path, **changes), trainer=trainer, builder=builder, merger=merger, progress=False).run()
    run_dir = tmp_path / "scripted"
    round1 = run_dir / "round-1"
    assert [e.label for e in result.evaluated] == ["base", "warm start", "round 1 JOSH-SFT", "round 1 control-gate"]

    gate = json.loads((round1 / "extract" / "extract_stats.json").read_text())["gate"]
    assert gate["removed"] >= 1 and gate["to_kto"] == gate["removed"] and gate["failed"] == 0
    assert len(lines(round1 / "extract" / JUDGE_GATE)) == gate["judged"] == gate["replies"]
    gated = messages(lines(round1 / "extract" / "sft.jsonl"))
    ungated = messages(lines(round1 / "control-gate" / "data" / "sft.jsonl"))
    assert len(gated) <= len(ungated) and sum(map(len, gated)) < sum(map(len, ungated))
    assert all(any(full[: len(cut)] == cut for full in ungated) for cut in gated)  # gated rows are cut ungated ones
    bad = [json.loads(row) for row in lines(round1 / "extract" / "kto.jsonl") if not json.loads(row)["label"]]
    assert len(bad) >= gate["removed"]

    warm_rows = lines(run_dir / "round-0" / "warmstart" / "data" / "sft.jsonl")
    josh = trainer.recipes[str(round1 / "train-sft")]
    control = trainer.recipes[str(round1 / "control-gate" / "train")]
    assert control.seed == josh.seed and control.optim == josh.optim  # trained exactly like the SFT arm
    assert lines(Path(josh.data)) == warm_rows + lines(round1 / "extract" / "sft.jsonl")
    assert lines(Path(control.data)) == warm_rows + lines(round1 / "control-gate" / "data" / "sft.jsonl")

    report = load_loop_report(run_dir)
    roles = {(c.model, c.baseline): c.role for c in report.comparisons}
    assert roles[("round 1 JOSH-SFT", "round 1 control-gate")] == "gate vs no gate"
    (harvest,) = report.harvest
    assert (harvest.gate_removed, harvest.gate_to_kto, harvest.gate_replies) == (
        gate["removed"], gate["to_kto"], gate["replies"],
    )  # fmt: skip
    markdown = (run_dir / "report.md").read_text()
    assert "judge gate: removed (to KTO) / failed of replies" in markdown
    assert f"{gate['removed']} ({gate['to_kto']}) / 0 of {gate['replies']}" in markdown

    again = StubTrainer()
    rerun = Loop(recipe(tmp_path, **changes), trainer=again, builder=builder, merger=merger, progress=False).run()
    assert rerun.ran == [] and again.calls == []  # nothing judged, extracted or trained twice


def test_a_later_round_control_trains_on_every_round_ungated(tmp_path: Path) -> None:
    trainer = RecordingTrainer()
    changes = {"kto": None, "rounds": 2, "extract": {"judge": GATE}, "controls": {"gate": True}}
    Loop(recipe(tmp_path, **changes), trainer=trainer, builder=builder, merger=merger, progress=False).run()
    run_dir = tmp_path / "scripted"
    warm_rows = lines(run_dir / "round-0" / "warmstart" / "data" / "sft.jsonl")
    control = trainer.recipes[str(run_dir / "round-2" / "control-gate" / "train")]
    ungated = [lines(run_dir / f"round-{r}" / "control-gate" / "data" / "sft.jsonl") for r in (1, 2)]
    assert lines(Path(control.data)) == warm_rows + ungated[0] + ungated[1]


def test_the_gate_control_needs_the_gate_and_an_sft_arm(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="controls.gate"):
        recipe(tmp_path, controls={"gate": True})
    without_control = recipe(tmp_path, extract={"judge": GATE})
    assert without_control.extract.judge is not None and not without_control.controls.gate
