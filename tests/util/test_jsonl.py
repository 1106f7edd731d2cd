import asyncio
import json
import os

import pytest
from pydantic import BaseModel

from josh.util.jsonl import (
    SKIP_ENV,
    CorruptLineError,
    JsonlWriter,
    iter_jsonl,
    skip_bad_default,
    skipping_bad_lines,
    write_as_completed,
    written_lines,
)


def test_torn_last_line_is_skipped_and_repaired(tmp_path):
    path = tmp_path / "x.jsonl"
    with JsonlWriter(path) as w:
        w.write({"a": 1})
        w.write({"a": 2})
    with path.open("a") as f:
        f.write('{"a": 3, "b"')
    assert [r["a"] for r in iter_jsonl(path, repair=True)] == [1, 2]
    with JsonlWriter(path) as w:
        w.write({"a": 4})
    assert [r["a"] for r in iter_jsonl(path)] == [1, 2, 4]


def test_each_record_is_readable_at_once_and_synced_to_disk_once_a_second_and_on_close(tmp_path, monkeypatch):
    import josh.util.jsonl as jsonl

    synced: list[int] = []
    clock = {"now": 100.0}
    monkeypatch.setattr(jsonl.os, "fsync", synced.append)
    monkeypatch.setattr(jsonl.time, "monotonic", lambda: clock["now"])
    path = tmp_path / "x.jsonl"
    with JsonlWriter(path) as w:
        for n in range(50):
            w.write({"n": n})
            assert json.loads(path.read_text().splitlines()[-1]) == {"n": n}  # flushed: another reader sees it
        assert synced == []  # within the same second: no sync yet
        clock["now"] += 1.0
        w.write({"n": 50})
        assert len(synced) == 1
        w.write({"n": 51})
        assert len(synced) == 1
    assert len(synced) == 2  # the close syncs what the last second wrote
    with JsonlWriter(path):
        pass
    assert len(synced) == 2  # nothing written, nothing to sync
    with JsonlWriter(path, sync_s=0) as w:
        w.write({"n": 52})
        w.write({"n": 53})
    assert len(synced) == 4


def test_corrupt_middle_line_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(CorruptLineError, match="line 2"):
        list(iter_jsonl(path))


def test_written_lines_numbers_every_line_and_passes_over_blank_ones_and_keeps_a_bad_last_one(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n   \n{"a": 2}\n{"a": 3, "b"', encoding="utf-8")
    assert list(written_lines(path)) == [(1, '{"a": 1}\n'), (4, '{"a": 2}\n'), (5, '{"a": 3, "b"')]


def test_missing_file_yields_nothing(tmp_path):
    assert list(iter_jsonl(tmp_path / "absent.jsonl")) == []


class Done(BaseModel):
    n: int


def test_write_as_completed_starts_jobs_in_order_bounded_and_appends_each_as_it_finishes(tmp_path) -> None:
    started: list[int] = []
    running = {"now": 0, "most": 0}

    async def job(n: int) -> Done:
        started.append(n)
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        await asyncio.sleep(0.01 * (5 - n))  # later jobs finish sooner
        running["now"] -= 1
        return Done(n=n)

    path = tmp_path / "out.jsonl"
    path.write_text('{"n": -1}\n')  # appended to, never truncated
    done = asyncio.run(write_as_completed(path, (job(n) for n in range(5)), concurrency=2))
    assert started == [0, 1, 2, 3, 4] and running["most"] == 2
    assert sorted(d.n for d in done) == [0, 1, 2, 3, 4]
    assert [json.loads(line)["n"] for line in path.read_text().splitlines()] == [-1, *(d.n for d in done)]


def test_skipping_bad_lines_skips_records_them_and_reaches_child_processes(tmp_path, monkeypatch):
    monkeypatch.delenv(SKIP_ENV, raising=False)
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"a": "cut\n{"a": 3}\n')
    with pytest.raises(CorruptLineError) as caught:
        list(iter_jsonl(path))
    assert str(caught.value) == f"{path}: line 2 is not valid JSON (Invalid control character at column 11)"
    with skipping_bad_lines() as skipped:
        assert [r["a"] for r in iter_jsonl(path)] == [1, 3]
        assert skip_bad_default() and os.environ[SKIP_ENV] == "1"  # accelerate launch, Ray workers
    assert skipped == {(str(path), 2): "is not valid JSON (Invalid control character at column 11)"}
    assert not skip_bad_default() and SKIP_ENV not in os.environ
    with skipping_bad_lines(False), pytest.raises(CorruptLineError):
        list(iter_jsonl(path))
