"""SFT / KTO / DPO extraction on trees from the table-driven search, and loading the files with ``datasets``."""

from __future__ import annotations

import json

import pytest

from josh.harvest.extract import STATS_FILE, ExtractConfig, ExtractStats, extract, extract_rows, tree_rows
from josh.search.algorithm import SearchConfig, search
from josh.search.tree import Tree
from josh.types import Message, ToolCall
from tests.fakes.conversation import FakeEnv, TableAgent, TableUser, make_task


async def grow(goals, n_goals=2, task_id="t0", **agent_kw) -> Tree:
    agent = TableAgent(goals=goals, **agent_kw)
    return await search(make_task(n_goals, task_id), FakeEnv(), agent, TableUser(), SearchConfig())


def contents(messages: list[dict]) -> list[str | None]:
    return [m["content"] for m in messages]


async def test_rows_of_a_successful_tree() -> None:
    tree = await grow({(1,): (0,), (1, 0, 1): (1,)})
    rows = tree_rows(tree)
    (sft,) = rows.sft
    msgs = sft["messages"]
    assert msgs[0] == {"role": "system", "content": "SYS"}
    assert [m["role"] for m in msgs[1:6]] == ["user", "assistant", "tool", "assistant", "user"]
    assert msgs[-1]["content"] == "reply 1.0.1" and len(msgs) == 13
    call = msgs[2]["tool_calls"][0]
    assert "content" not in msgs[2]  # TRL's tool-calling format: a turn that only calls a tool has no content
    assert call["type"] == "function" and call["function"] == {"name": "act", "arguments": {"path": "1"}}
    assert msgs[3]["tool_call_id"] == call["id"] and msgs[3]["name"] == "act"
    assert sft["tools"] == tree.tools
    good = [r for r in rows.kto if r["label"]]
    bad = [r for r in rows.kto if not r["label"]]
    assert [r["completion"][-1]["content"] for r in good] == ["reply 1", "reply 1.0", "reply 1.0.1"]
    assert [r["completion"][-1]["content"] for r in bad] == ["reply 0", "reply 1.1", "reply 1.0.0"]
    for r in rows.kto:
        assert r["prompt"][0]["role"] == "system" and r["prompt"][-1]["role"] == "user"
        assert r["completion"][0]["role"] == "assistant"
    assert [(d["chosen"][-1]["content"], d["rejected"][-1]["content"]) for d in rows.dpo] == [
        ("reply 1", "reply 0"),
        ("reply 1.0", "reply 1.1"),
        ("reply 1.0.1", "reply 1.0.0"),
    ]
    assert all(d["prompt"] == g["prompt"] for d, g in zip(rows.dpo, good, strict=True))


async def test_partial_credit_turns_are_never_negatives() -> None:
    tree = await grow({(0,): (0,), (1,): (1,), (0, 1): (1,)})
    rows = tree_rows(tree)
    bad = [r["completion"][-1]["content"] for r in rows.kto if not r["label"]]
    assert bad == ["reply 0.0"] and len(rows.dpo) == 1


async def test_identical_sibling_is_not_emitted_with_both_labels() -> None:
    tree = await grow({(1,): (0,), (1, 0, 1): (1,)})
    ideal = next(n for n in tree.nodes if n.depth == 1 and n.ideal)
    twin = next(n for n in tree.nodes if n.depth == 1 and n.pruned)
    fresh = ToolCall(name="act", arguments={"path": "1"})
    twin.messages = [
        Message(role="assistant", tool_calls=(fresh,)),
        Message(role="tool", content=ideal.messages[1].content, tool_call_id=fresh.id),
        ideal.messages[2],
    ]
    stats = ExtractStats()
    rows = extract_rows([tree], ExtractConfig(), stats)
    assert stats.kto_conflicts_dropped == 1
    assert stats.kto_desirable == 3 and stats.kto_undesirable == 2 and len(rows.dpo) == 2


async def test_filters_reward_errors_and_duplicates() -> None:
    full = await grow({(1,): (0,), (1, 0, 1): (1,)})
    half = await grow({(0,): (0,)}, task_id="half")
    erring = await grow({(0,): (0,), (0, 0): (1,)}, task_id="err", errors={(0,)})
    stats = ExtractStats()
    rows = extract_rows([full, half, erring, full], ExtractConfig(), stats)
    assert (stats.accepted, stats.below_reward, stats.with_errors) == (2, 1, 1)
    assert stats.sft == 1 and stats.duplicates_dropped == 3 + 3 + 3 + 1
    loose = ExtractStats()
    rows = extract_rows([half, erring], ExtractConfig(min_reward=0.5, drop_errors=[]), loose)
    assert loose.accepted == 2 and len(rows.sft) == 2
    assert rows.sft[0]["messages"][-1]["content"] == "reply 0"


async def test_failed_task_gives_nothing() -> None:
    tree = await search(make_task(0), FakeEnv(), TableAgent(), TableUser())
    stats = ExtractStats()
    assert extract_rows([tree], ExtractConfig(), stats).sft == [] and stats.failed_tasks == 1


async def test_files_load_with_datasets(tmp_path) -> None:
    datasets = pytest.importorskip("datasets")
    trees = [await grow({(1,): (0,), (1, 0, 1): (1,)}, task_id=f"t{i}") for i in range(2)]
    run = tmp_path / "run"
    run.mkdir()
    with (run / "trees.jsonl").open("w") as f:
        for t in trees:
            f.write(t.model_dump_json() + "\n")
        f.write('{"task_id": "torn", "nod')
    stats = extract(run, tmp_path / "out")
    assert stats.trees == 2 and stats.unreadable == 1 and stats.sft == 1
    assert stats.tokens["sft"] > 0 and 0 < stats.kto_desirable_fraction < 1
    for name, columns in (("sft", {"messages", "tools"}), ("kto", {"prompt", "completion", "label", "tools"})):
        ds = datasets.load_dataset("json", data_files=str(tmp_path / "out" / f"{name}.jsonl"), split="train")
        assert columns <= set(ds.column_names)
    dpo = datasets.load_dataset("json", data_files=str(tmp_path / "out" / "dpo.jsonl"), split="train")
    assert dpo.num_rows == 3 and dpo[0]["chosen"][-1]["content"] == "reply 1"
    assert json.loads((tmp_path / "out" / STATS_FILE).read_text())["kto_undesirable"] == 3


def test_missing_trees_file_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="josh rollout"):
        extract(tmp_path, tmp_path / "out")
