"""The rows ``josh extract`` writes are TRL's conversational tool-calling format: their messages, the dataset card,
``datasets`` loading them as written, josh's own training loader reading them, and ``--push-to-hub``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from josh.cli.main import app
from josh.harvest.extract import extract
from josh.harvest.trl_rows import trl_messages
from josh.search.algorithm import SearchConfig, search
from josh.search.tree import Tree
from josh.types import Message, ToolCall, assistant, tool_result, user
from tests.fakes.conversation import FakeEnv, TableAgent, TableUser, make_task

NAMES = st.sampled_from(["find", "book", "cancel"])
ARGUMENTS = st.one_of(st.dictionaries(st.sampled_from("abc"), st.integers() | st.text(max_size=5)), st.just("{bad"))


@settings(max_examples=40)
@given(st.lists(st.tuples(NAMES, ARGUMENTS, st.text(max_size=8)), min_size=1, max_size=4))
def test_each_tool_result_is_named_after_its_call(calls: list[tuple[str, object, str]]) -> None:
    messages = [user("hi")]
    for name, arguments, result in calls:
        call = ToolCall(name=name, arguments=arguments)
        messages += [assistant(calls=[call]), tool_result(call.id, result)]
    rows = trl_messages(messages)
    for (name, arguments, _), turn, answer in zip(calls, rows[1::2], rows[2::2], strict=True):
        assert "content" not in turn and turn["tool_calls"][0]["function"] == {"name": name, "arguments": arguments}
        assert answer["role"] == "tool" and answer["name"] == name
        assert answer["tool_call_id"] == turn["tool_calls"][0]["id"]
    assert [Message.from_openai(r) for r in rows] == messages


@pytest.fixture(scope="module")
def harvest(tmp_path_factory) -> Path:
    """``josh extract`` on two searched trees of the table-driven fakes, with the rollout's run block."""

    async def grow(task_id: str) -> Tree:
        agent = TableAgent(goals={(1,): (0,), (1, 0, 1): (1,)})
        return await search(make_task(2, task_id), FakeEnv(), agent, TableUser(), SearchConfig())

    import asyncio

    run = tmp_path_factory.mktemp("run")
    trees = [asyncio.run(grow(t)) for t in ("a", "b")]
    (run / "trees.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in trees))
    block = {"env": "toolwoz", "data": "mini", "split": "train", "agent": "tools", "backend": "hf", "model": "smollm2"}
    (run / "stats.json").write_text(json.dumps({"tasks": 2, "run": {**block, "user": "agenda"}}))
    extract(run, run / "data")
    return run / "data"


def test_the_card_states_source_counts_and_licence(harvest: Path) -> None:
    text = (harvest / "README.md").read_text()
    header = yaml.safe_load(text.split("---\n")[1])
    assert header["license"] == "mit"
    assert [c["config_name"] for c in header["configs"]] == ["sft", "kto", "dpo"]
    assert "| environment | toolwoz (data mini, split train) |" in text and "| policy | tools hf:smollm2 |" in text
    assert "| user simulator | agenda |" in text and "trees.jsonl" in text
    stats = json.loads((harvest / "extract_stats.json").read_text())
    assert f"| kto.jsonl | {stats['kto_desirable']} desirable + {stats['kto_undesirable']} undesirable |" in text
    assert f"{stats['accepted']} of {stats['trees']} trees used" in text


def test_datasets_loads_the_rows_as_written(harvest: Path) -> None:
    datasets = pytest.importorskip("datasets")
    for name in ("sft", "kto", "dpo"):
        written = [json.loads(line) for line in (harvest / f"{name}.jsonl").read_text().splitlines()]
        cache = str(harvest.parent / "hf-cache")  # its own cache: pytest reuses folder names across sessions
        loaded = datasets.load_dataset(str(harvest), name, split="train", cache_dir=cache)
        assert loaded.to_list() == written  # no key added, none lost, arguments still objects


def test_josh_training_loader_reads_the_rows(harvest: Path) -> None:
    pytest.importorskip("datasets")
    from josh.training.data import read_rows

    (row,) = read_rows(harvest / "sft.jsonl", "sft")
    call = next(m for m in row["messages"] if m["tool_calls"])["tool_calls"][0]
    assert call["function"] == {"name": "act", "arguments": '{"path": "1"}'}
    kto = read_rows(harvest / "kto.jsonl", "kto")
    assert {r["label"] for r in kto} == {True, False} and json.loads(kto[0]["tools"])[0]["function"]["name"] == "act"


def test_push_to_hub_sends_each_file_and_the_card(harvest: Path, monkeypatch) -> None:
    datasets = pytest.importorskip("datasets")
    import huggingface_hub

    pushed: list[tuple[str, str, int]] = []
    cards: list[str] = []

    def push(self, repo, config_name, split, private):
        pushed.append((repo, config_name, self.num_rows))

    generated = huggingface_hub.DatasetCard("---\nconfigs:\n- config_name: sft\n  data_files: data/sft-*\n---\n")
    monkeypatch.setattr(datasets.Dataset, "push_to_hub", push)
    monkeypatch.setattr(huggingface_hub.DatasetCard, "load", classmethod(lambda cls, repo, repo_type: generated))
    monkeypatch.setattr(
        huggingface_hub.DatasetCard, "push_to_hub", lambda self, repo, repo_type: cards.append(str(self))
    )
    run = harvest.parent
    result = CliRunner().invoke(app, ["extract", str(run), "--out", str(harvest), "--push-to-hub", "me/rows"])
    assert result.exit_code == 0, result.output
    stats = json.loads((harvest / "extract_stats.json").read_text())
    kto = stats["kto_desirable"] + stats["kto_undesirable"]
    assert pushed == [("me/rows", "sft", stats["sft"]), ("me/rows", "kto", kto), ("me/rows", "dpo", stats["dpo"])]
    (card,) = cards
    assert "data/sft-*" in card and "# josh training data" in card and "license: mit" in card
    assert "pushed sft, kto, dpo and the dataset card to https://huggingface.co/datasets/me/rows" in result.output
