"""The one atomic writer: whole files and folders or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from josh.util.atomic import write_atomic, write_folder_atomic


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
