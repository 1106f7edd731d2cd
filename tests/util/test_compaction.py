"""Compaction of a streamed JSON-lines file: the latest line of each key, in the order given, copied byte for byte,
written beside the file and renamed over it; a file already compact is left as it is."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from josh.run.resumable import Counted, RunSession
from josh.util.compaction import beside, compact, latest_lines


def read_key(value: Any) -> tuple[str, bool] | None:
    return (value["k"], bool(value.get("failed"))) if "k" in value else None


def dump(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False) + "\n"


KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
LINE = st.one_of(
    st.fixed_dictionaries({"k": KEYS, "failed": st.booleans(), "text": st.text(max_size=8)}),
    st.fixed_dictionaries({"note": st.text(max_size=8)}),  # a line of no key
)


@given(lines=st.lists(LINE, max_size=14), order=st.lists(KEYS, unique=True))
def test_compaction_keeps_the_latest_line_of_each_key_in_order_and_nothing_else(lines, order) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "results.jsonl"
        path.write_text("".join(dump(line) for line in lines), encoding="utf-8")
        latest: dict[str, str] = {}
        for line in lines:
            if "k" in line:
                latest[line["k"]] = dump(line)  # a later line replaces the text, not the place it first took
        named = [k for k in order if k in latest]
        expected = [latest[k] for k in named] + [v for k, v in latest.items() if k not in named]
        expected += [dump(line) for line in lines if "k" not in line]

        rewritten = compact(path, latest_lines(path, read_key), order)

        assert path.read_text(encoding="utf-8") == "".join(expected)
        assert rewritten == (expected != [dump(line) for line in lines])
        assert not beside(path).exists()
        assert compact(path, latest_lines(path, read_key), order) is False  # compact already: left alone


def test_a_last_line_without_its_newline_is_copied_whole(tmp_path: Path) -> None:
    path = tmp_path / "trees.jsonl"
    path.write_text(dump({"k": "b"}) + dump({"k": "a", "n": 1}) + json.dumps({"k": "a", "n": 2}), encoding="utf-8")
    assert compact(path, latest_lines(path, read_key), ["a", "b"])
    assert path.read_text(encoding="utf-8") == dump({"k": "a", "n": 2}) + dump({"k": "b"})


def session(path: Path, keys: list[str]) -> RunSession[str, str]:
    def scan(p: Path):
        for value in map(json.loads, p.read_text(encoding="utf-8").splitlines()) if p.is_file() else ():
            found = read_key(value)
            if found is not None:
                yield found

    return RunSession(
        keys, str, path, scan, path.with_name("stats.json"), lambda n: Counted("x", n, False), read_key=read_key
    )


def test_a_run_with_a_piece_failed_or_pending_is_not_compacted(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    streamed = dump({"k": "b"}) + dump({"k": "a", "failed": "llm_error"}) + dump({"k": "a"}) + dump({"k": "b"})
    path.write_text(streamed, encoding="utf-8")
    assert session(path, ["a", "b", "c"]).compact() is False  # c is pending
    path.write_text(streamed + dump({"k": "c", "failed": "llm_error"}), encoding="utf-8")
    assert session(path, ["a", "b", "c"]).compact() is False  # c failed: it is done again on the next run
    assert path.read_text(encoding="utf-8") == streamed + dump({"k": "c", "failed": "llm_error"})
    path.write_text(streamed + dump({"k": "c"}), encoding="utf-8")
    assert session(path, ["a", "b", "c"]).compact() is True
    assert path.read_text(encoding="utf-8") == dump({"k": "a"}) + dump({"k": "b"}) + dump({"k": "c"})


def test_a_new_session_removes_what_a_killed_compaction_left_beside_the_file(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(dump({"k": "a"}) + dump({"k": "a"}), encoding="utf-8")
    beside(path).write_text(dump({"k": "a"})[:5], encoding="utf-8")
    started = session(path, ["a"])
    assert not beside(path).exists() and started.todo == []
    assert started.compact() and path.read_text(encoding="utf-8") == dump({"k": "a"})
