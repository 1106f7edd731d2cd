from pathlib import Path

import pytest

from josh.util.filestamps import FolderCache


def counting_cache() -> tuple[FolderCache[str], list[Path]]:
    """A cache over ``a.txt`` and ``b.txt`` whose loads are recorded."""
    loads: list[Path] = []

    def load(folder: Path) -> str:
        loads.append(folder)
        return (folder / "a.txt").read_text() + (folder / "b.txt").read_text()

    return FolderCache(load, ["a.txt", "b.txt"]), loads


def test_an_unchanged_folder_loads_once_however_it_is_named(tmp_path: Path) -> None:
    cache, loads = counting_cache()
    (tmp_path / "a.txt").write_text("1")
    (tmp_path / "b.txt").write_text("2")
    first = cache(tmp_path)
    assert first == "12" and cache(tmp_path) is first and cache(tmp_path / ".") is first
    assert loads == [tmp_path.resolve()]


def test_a_changed_removed_or_restored_file_is_read_again(tmp_path: Path) -> None:
    cache, loads = counting_cache()
    (tmp_path / "a.txt").write_text("1")
    (tmp_path / "b.txt").write_text("2")
    assert cache(tmp_path) == "12"
    (tmp_path / "b.txt").write_text("22")
    assert cache(tmp_path) == "122"
    (tmp_path / "a.txt").unlink()
    with pytest.raises(FileNotFoundError):
        cache(tmp_path)
    with pytest.raises(FileNotFoundError):  # a failed load is not kept: it is tried again, and fails again
        cache(tmp_path)
    (tmp_path / "a.txt").write_text("3")
    assert cache(tmp_path) == "322" and len(loads) == 5
    cache.clear()
    assert cache(tmp_path) == "322" and len(loads) == 6
