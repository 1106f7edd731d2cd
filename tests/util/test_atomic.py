"""The one atomic writer: whole files and folders or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from josh.util.atomic import no_half_made, write_atomic, write_folder_atomic


def test_text_bytes_and_lines_land_whole(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "out.jsonl"
    write_atomic(target, "a\n")
    assert target.read_text() == "a\n"
    write_atomic(target, (f"{i}\n" for i in range(3)))
    assert target.read_text() == "0\n1\n2\n"
    write_atomic(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert [p.name for p in target.parent.iterdir()] == ["out.jsonl"]


def test_a_write_that_fails_half_way_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "rows.jsonl"
    target.write_text("old\n")

    def rows():
        yield "new\n"
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        write_atomic(target, rows())
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def test_lone_surrogates_need_an_error_handler(tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    with pytest.raises(UnicodeEncodeError):
        write_atomic(target, "bad \udc80")
    assert not target.exists()
    write_atomic(target, "bad \udc80", errors="surrogateescape")
    assert target.read_bytes() == b"bad \x80"


def test_a_folder_is_replaced_whole_and_a_failed_fill_keeps_the_old_one(tmp_path: Path) -> None:
    target = tmp_path / "models" / "m"
    write_folder_atomic(target, lambda folder: (folder / "old.bin").write_text("old"))
    write_folder_atomic(target, lambda folder: (folder / "new.bin").write_text("new"))
    assert [p.name for p in target.iterdir()] == ["new.bin"] and target.stat().st_mode & 0o755 == 0o755

    def half(folder: Path) -> None:
        (folder / "part.bin").write_text("part")
        raise RuntimeError("killed mid-save")

    with pytest.raises(RuntimeError, match="mid-save"):
        write_folder_atomic(target, half)
    assert [p.name for p in target.parent.iterdir()] == ["m"] and (target / "new.bin").read_text() == "new"


def test_a_failed_command_removes_only_the_folder_it_made_and_left_without_records(tmp_path: Path) -> None:
    out = tmp_path / "new" / "run"
    with pytest.raises(ValueError), no_half_made(out):
        out.mkdir(parents=True)
        (out / "eval.log").write_text("library noise\n")
        (out / "results.jsonl").touch()
        raise ValueError("no such model")
    assert not (tmp_path / "new").exists()  # the parent it made for the folder too
    with pytest.raises(KeyboardInterrupt), no_half_made(out):
        out.mkdir(parents=True)
        (out / "results.jsonl").write_text('{"task_id": "t1"}\n')
        raise KeyboardInterrupt
    assert (out / "results.jsonl").is_file()  # a record: kept, the rerun resumes
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(ValueError), no_half_made(existing):
        raise ValueError("bad option")
    assert existing.is_dir()
    with no_half_made(tmp_path / "fine"):
        (tmp_path / "fine").mkdir()
    assert (tmp_path / "fine").is_dir()
