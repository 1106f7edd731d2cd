import pytest

from josh.util.jsonl import CorruptLineError, JsonlWriter, iter_jsonl


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


def test_corrupt_middle_line_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(CorruptLineError, match="line 2"):
        list(iter_jsonl(path))


def test_missing_file_yields_nothing(tmp_path):
    assert list(iter_jsonl(tmp_path / "absent.jsonl")) == []
