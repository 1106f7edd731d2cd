"""The judge gate of extraction: a scripted judge scores the ideal path's replies; low-scored turns leave SFT (the
row is cut before them) and KTO's desirable rows, go to KTO as undesirable with ``route: kto``; failed judgements
keep their turn; the verdict cache makes a rerun judge nothing again."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from josh.core.llm import LLMError
from josh.eval.judge.reply import reply_judge
from josh.harvest.extract import ExtractConfig, extract
from josh.harvest.judge_gate import JudgeGate
from josh.llm.scripted import ScriptedLLM
from josh.run.spec_check import judge_problems
from josh.search.algorithm import SearchConfig, search
from josh.search.tree import Tree
from josh.types import Message
from josh.util.layout import JUDGE_GATE, rows_file
from tests.fakes.conversation import FakeEnv, TableAgent, TableUser, make_task

# the ideal path's replies are "reply 1", "reply 1.0", "reply 1.0.1"; its pruned siblings "reply 0", "reply 1.1",
# "reply 1.0.0" (tests/harvest/test_extract_rows.py)
GOALS = {(1,): (0,), (1, 0, 1): (1,)}
JUDGE = reply_judge(None, grammar=False)


def answer(cohesion: int, backend: int = 5) -> str:
    return json.dumps({"cohesion": {"score": cohesion, "why": "."}, "backend": {"score": backend, "why": "."}})


def judge_llm(answers: dict[str, str | Exception]) -> ScriptedLLM:
    """A judge that answers per graded reply (default: full marks); an exception is raised instead of answering."""

    def policy(messages: list[Message], tools: object, index: int) -> str:
        graded = (messages[-1].content or "").split("REPLY TO GRADE: ")[1].splitlines()[0]
        got = answers.get(graded, answer(5))
        if isinstance(got, Exception):
            raise got
        return got

    return ScriptedLLM(policy)


@pytest.fixture
async def trees(tmp_path: Path) -> Path:
    tree: Tree = await search(make_task(2), FakeEnv(), TableAgent(goals=GOALS), TableUser(), SearchConfig())
    path = tmp_path / "trees.jsonl"
    path.write_text(tree.model_dump_json() + "\n", encoding="utf-8")
    return path


def run(trees: Path, out: Path, llm: ScriptedLLM, **gate: object):
    config = ExtractConfig(judge=JudgeGate(backend="scripted", model=None, **gate))
    return extract(trees, out, config, judge=JUDGE, judge_llm=llm)


def rows(out: Path, fmt: str) -> list[dict]:
    """The rows of one format (none: an extraction writes no file for a format without rows)."""
    path = out / rows_file(fmt)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def last(messages: list[dict]) -> str:
    return messages[-1]["content"]


def kto(out: Path, label: bool) -> list[str]:
    return [last(r["completion"]) for r in rows(out, "kto") if r["label"] is label]


def test_the_gate_removes_exactly_the_turns_scored_below_the_threshold(trees: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    llm = judge_llm({"reply 1.0": answer(5, backend=2), "reply 1": answer(3)})  # 3 is at the threshold: kept
    stats = run(trees, out, llm)
    assert len(llm.requests) == 3  # one per reply with text; the turns' tool-call messages are not judged
    (sft,) = rows(out, "sft")
    assert last(sft["messages"]) == "reply 1" and "reply 1.0.1" not in json.dumps(sft)  # cut before "reply 1.0"
    assert kto(out, True) == ["reply 1", "reply 1.0.1"]
    assert kto(out, False) == ["reply 0", "reply 1.1", "reply 1.0.0"]
    assert [last(r["chosen"]) for r in rows(out, "dpo")] == ["reply 1", "reply 1.0.1"]
    assert stats.gate is not None
    assert stats.gate.model_dump(exclude={"judge"}) == {
        "replies": 3, "judged": 3, "cached": 0, "failed": 0, "removed": 1, "to_kto": 0, "cut": 1,
    }  # fmt: skip
    saved = json.loads((out / "extract_stats.json").read_text())
    assert saved["gate"]["removed"] == 1 and saved["kto_desirable"] == 2


def test_route_kto_makes_a_failed_turn_undesirable(trees: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    stats = run(trees, out, judge_llm({"reply 1.0.1": answer(1)}), route="kto")
    assert kto(out, True) == ["reply 1", "reply 1.0"]
    assert sorted(kto(out, False)) == sorted(["reply 0", "reply 1.1", "reply 1.0.0", "reply 1.0.1"])
    assert last(rows(out, "sft")[0]["messages"]) == "reply 1.0"
    assert stats.gate is not None and (stats.gate.removed, stats.gate.to_kto, stats.gate.cut) == (1, 1, 0)


def test_a_failed_first_turn_leaves_no_sft_row(trees: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    stats = run(trees, out, judge_llm({"reply 1": answer(2)}))
    assert rows(out, "sft") == [] and stats.sft == 0
    assert kto(out, True) == ["reply 1.0", "reply 1.0.1"]
    assert stats.gate is not None and (stats.gate.removed, stats.gate.cut) == (1, 2)


def test_failed_judgements_keep_their_turn_and_are_counted(trees: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    answers: dict[str, str | Exception] = {"reply 1": "no scores here", "reply 1.0": LLMError("server down")}
    stats = run(trees, out, judge_llm(answers))
    assert stats.gate is not None and (stats.gate.failed, stats.gate.removed) == (2, 0)
    assert last(rows(out, "sft")[0]["messages"]) == "reply 1.0.1"
    assert kto(out, True) == ["reply 1", "reply 1.0", "reply 1.0.1"]
    errors = [json.loads(line)["error"] for line in (out / JUDGE_GATE).read_text().splitlines()]
    assert sorted(e is not None for e in errors) == [False, True, True]
    retry = judge_llm({})
    again = run(trees, out, retry)  # a rerun asks again for the failed ones only
    assert len(retry.requests) == 2 and again.gate is not None
    assert (again.gate.cached, again.gate.judged, again.gate.failed) == (1, 2, 0)


def test_a_rerun_reads_the_cache_and_judges_nothing(trees: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = run(trees, out, judge_llm({"reply 1.0": answer(1)}))
    files = {fmt: (out / rows_file(fmt)).read_text() for fmt in ("sft", "kto", "dpo")}
    silent = judge_llm({})
    second = run(trees, out, silent)
    assert silent.requests == []
    assert second.gate is not None and first.gate is not None
    assert (second.gate.cached, second.gate.judged) == (3, 0) and second.gate.removed == first.gate.removed == 1
    assert {fmt: (out / rows_file(fmt)).read_text() for fmt in files} == files
    other = judge_llm({})  # another judge's verdicts are not this judge's
    config = ExtractConfig(judge=JudgeGate(backend="scripted", model="other"))
    extract(trees, out, config, judge=JUDGE, judge_llm=other)
    assert len(other.requests) == 3


def test_the_gate_is_off_by_default_and_absent_from_the_settings() -> None:
    assert ExtractConfig().judge is None and "judge" not in ExtractConfig().model_dump(mode="json")
    on = ExtractConfig(judge={"backend": "scripted", "model": None, "route": "kto"})
    assert on.model_dump(mode="json")["judge"]["route"] == "kto"


@pytest.mark.parametrize("bad", [{"threshold": 6}, {"route": "keep"}, {"rout": "kto"}])
def test_bad_gate_settings_are_one_clear_error(bad: dict) -> None:
    with pytest.raises(ValidationError):
        JudgeGate(**bad)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"backend": "nope"}, "extract.judge.backend: unknown backend 'nope'"),
        ({"backend": "openai", "llm_options": {"x": 1}}, "unknown key 'extract.judge.llm_options.x' for the openai"),
    ],
)
def test_a_gate_backend_and_its_settings_are_checked_where_the_recipe_is_read(bad: dict, message: str) -> None:
    (problem,) = judge_problems(JudgeGate(**bad), ("extract", "judge"))
    assert problem.startswith(message)


def test_a_gate_without_a_judge_is_an_error(trees: Path, tmp_path: Path) -> None:
    config = ExtractConfig(judge=JudgeGate(backend="scripted", model=None))
    with pytest.raises(ValueError, match="no reply judge"):
        extract(trees, tmp_path / "out", config)


def test_a_changed_judge_prompt_judges_every_reply_again(trees: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(trees, out, judge_llm({}))
    versions = {json.loads(line)["prompt_version"] for line in (out / JUDGE_GATE).read_text().splitlines()}
    assert versions == {JUDGE.prompt_version}
    fresh = judge_llm({"reply 1.0": answer(1)})
    config = ExtractConfig(judge=JudgeGate(backend="scripted", model=None))
    stats = extract(trees, out, config, judge=replace(JUDGE, prompt_version="josh-judge-2"), judge_llm=fresh)
    assert len(fresh.requests) == 3  # the same judge under another prompt reuses none of the cached verdicts
    assert stats.gate is not None and (stats.gate.cached, stats.gate.judged, stats.gate.removed) == (0, 3, 1)
