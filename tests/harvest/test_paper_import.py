"""``josh data import-paper``: the authors' JOSH rollouts as josh trees and rows (the real wheel: slow), and the
error paths on tiny hand-built archives of the same layout."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.agents.react import parse_react
from josh.cli.main import app
from josh.harvest.extract import read_trees
from josh.harvest.paper_archive import PaperArchiveError, read_rollouts
from josh.harvest.paper_import import import_paper

MEMBER = "records/training_data_v2/sim_{}.json"
OPENING = {"role": "user", "content": "I need a cheap restaurant in the centre."}
CALL = {
    "role": "assistant",
    "content": 'PLAN I will search. <COMMAND_END> APICALL {"name": "search_restaurant", "parameters": '
    '{"pricerange": "cheap", "area": "centre"}} <COMMAND_END>',
}
RESULT = {"role": "user", "content": 'APIRETURN [{"name": "dojo noodle bar", "area": "centre"}]'}
SPEAK = {"role": "assistant", "content": "SPEAK Dojo Noodle Bar is cheap and central. <COMMAND_END>"}
WRONG = {"role": "assistant", "content": "SPEAK Sorry, there is nothing. <COMMAND_END>"}
REPLY = {"role": "user", "content": "Great, book it for two."}
LATER = {"role": "assistant", "content": "SPEAK For which day? <COMMAND_END>"}


def record(reached: bool = True) -> dict:
    """One conversation's tree: a rewarded turn (golden), a pruned sibling and a later successful branch."""
    paths = [
        [[], True, True],
        [[OPENING, CALL, RESULT, SPEAK], True, True],
        [[OPENING, WRONG], False, False],
        [[OPENING, CALL, RESULT, SPEAK, REPLY, LATER], True, False],
    ]
    return {"internal_messages": [[OPENING]], "training_paths": paths, "100_percent_reached": reached}


def archive(path: Path, members: dict[str, object]) -> Path:
    with zipfile.ZipFile(path, "w") as out:
        for name, data in members.items():
            out.writestr(name, data if isinstance(data, str) else json.dumps(data))
    return path


def test_a_hand_built_record_maps_flags_and_rows(tmp_path) -> None:
    path = archive(tmp_path / "r.zip", {MEMBER.format("SNG0001"): record(), MEMBER.format("SNG0002"): record(False)})
    stats = import_paper(path, tmp_path / "out")
    assert (stats.convert.conversations, stats.convert.reached_100) == (2, 1)
    tree = next(read_trees(tmp_path / "out" / "trees.jsonl"))
    root, rewarded, wrong, later = tree.nodes
    assert root.user == OPENING["content"] and rewarded.user == REPLY["content"]
    assert (rewarded.ideal, rewarded.pruned, wrong.pruned, wrong.ideal) == (True, False, True, False)
    assert (later.partial, later.ideal) == (True, False) and tree.protocol == "react" and tree.reward == 1.0
    sft = [json.loads(line) for line in (tmp_path / "out" / "sft.jsonl").read_text().splitlines()]
    assert [m["role"] for m in sft[0]["messages"]] == ["system", "user", "assistant", "user", "assistant"]
    kto = [json.loads(line) for line in (tmp_path / "out" / "kto.jsonl").read_text().splitlines()]
    assert [r["label"] for r in kto] == [True, False] and stats.extract.accepted == 1
    card = (tmp_path / "out" / "README.md").read_text()
    assert card.startswith("---\nlicense: mit\n") and "josh-train 0.1.4" in card and "| sft.jsonl | 1 |" in card


def test_identical_outputs_answered_differently_stay_two_nodes(tmp_path) -> None:
    other = {"role": "user", "content": "No, somewhere in the north."}
    data = record()
    data["training_paths"].append([[OPENING, CALL, RESULT, SPEAK, other, WRONG], False, False])
    import_paper(archive(tmp_path / "r.zip", {MEMBER.format("SNG0001"): data}), tmp_path / "out")
    tree = next(read_trees(tmp_path / "out" / "trees.jsonl"))
    replies = sorted(n.user for n in tree.nodes if n.parent == 0 and n.reply == "Dojo Noodle Bar is cheap and central.")
    assert replies == sorted([REPLY["content"], other["content"]])


@pytest.mark.parametrize(
    ("members", "problem"),
    [
        ({"data.json": {}}, "no records/training_data_v2/sim_<ID>.json inside"),
        ({MEMBER.format("MUL0001"): {"training_paths": []}}, "sim_MUL0001.json is not a JOSH rollout record"),
        ({MEMBER.format("MUL0001"): "[1, 2"}, "sim_MUL0001.json is not a JOSH rollout record"),
    ],
)
def test_another_layout_is_one_line_and_writes_nothing(tmp_path, members, problem) -> None:
    path = archive(tmp_path / "other.zip", members)
    with pytest.raises(PaperArchiveError, match="not the authors|not a JOSH rollout"):
        read_rollouts(path)
    result = CliRunner().invoke(app, ["data", "import-paper", "--archive", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and problem in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_a_file_that_is_no_zip_or_a_full_folder_is_refused(tmp_path) -> None:
    (tmp_path / "junk.whl").write_text("not a zip")
    with pytest.raises(PaperArchiveError, match="not a zip archive"):
        read_rollouts(tmp_path / "junk.whl")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an empty folder"):
        import_paper(archive(tmp_path / "r.zip", {MEMBER.format("SNG0001"): record()}), tmp_path / "full")
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"


@pytest.fixture(scope="module")
def imported(paper_wheel, tmp_path_factory) -> Path:
    """The command as a user runs it: no --archive, so the verified wheel in josh's cache (the session's copy)."""
    from josh.envs.toolwoz.paper_package import WHEEL

    cache = tmp_path_factory.mktemp("cache")
    (cache / "josh-train").mkdir()
    (cache / "josh-train" / WHEEL).symlink_to(paper_wheel)
    out = tmp_path_factory.mktemp("paper") / "imported"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JOSH_CACHE", str(cache))
        result = CliRunner().invoke(app, ["data", "import-paper", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "926" in result.output and "631" in result.output
    return out


@pytest.mark.slow
def test_the_real_rollouts_give_the_counts_and_readable_trees(imported) -> None:
    stats = json.loads((imported / "import_stats.json").read_text())
    assert stats["convert"]["conversations"] == 926 and stats["convert"]["reached_100"] == 631
    extract = stats["extract"]
    assert extract["trees"] == 926 and extract["rewarded"] == 631 and extract["sft"] == extract["accepted"] > 300
    assert extract["kto_desirable"] > 1000 and extract["kto_undesirable"] > 500
    trees = list(read_trees(imported / "trees.jsonl"))
    assert sum(t.success for t in trees) == 631 and all(t.protocol == "react" for t in trees)


@pytest.mark.slow
def test_every_imported_output_reads_back_under_josh_react(imported) -> None:
    for line in (imported / "sft.jsonl").read_text().splitlines():
        for message in json.loads(line)["messages"]:
            if message["role"] == "assistant":
                parsed = parse_react(message["content"])
                assert parsed.error is None and (parsed.calls or parsed.reply), message["content"]


@pytest.mark.slow
def test_the_training_loader_takes_the_rows_unchanged(imported) -> None:
    from josh.training.data import read_rows, to_dataset

    sft = read_rows(imported / "sft.jsonl", "sft")
    kto = read_rows(imported / "kto.jsonl", "kto")
    assert len(to_dataset(sft)) == len((imported / "sft.jsonl").read_text().splitlines())
    assert {True, False} == {r["label"] for r in kto}


@pytest.mark.slow
def test_josh_view_shows_an_imported_tree(imported, tmp_path) -> None:
    page = tmp_path / "tree.html"
    result = CliRunner().invoke(app, ["view", str(imported), "--task", "MUL0001", "--out", str(page)])
    assert result.exit_code == 0, result.output
    assert "pruned" in page.read_text()
