"""``load_toolwoz`` sources, the download (against local file:// URLs, never the network) and ``josh data``."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs.toolwoz.data import SHIPPED_MINI, load_toolwoz, read_tasks, write_tasks
from josh.envs.toolwoz.download import DownloadError, download_multiwoz, download_toolwoz, fetch
from josh.envs.toolwoz.multiwoz import DataFormatError

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "multiwoz"
runner = CliRunner()


def _fake_remote(root: Path, *, with_lists: bool = True) -> tuple[str, str]:
    """A MultiWOZ-2.1-like archive and db files on disk; returns (archive URL, db URL template)."""
    root.mkdir(parents=True)
    with zipfile.ZipFile(root / "MultiWOZ_2.1.zip", "w") as zf:
        zf.write(FIXTURE / "data.json", "MULTIWOZ2.1/data.json")
        zf.writestr("__MACOSX/MULTIWOZ2.1/._data.json", "junk")
        if with_lists:
            zf.write(FIXTURE / "testListFile.json", "MULTIWOZ2.1/testListFile.json")
            zf.write(FIXTURE / "valListFile.json", "MULTIWOZ2.1/valListFile.json")
    for db_file in (SHIPPED_MINI / "db").glob("*_db.json"):
        shutil.copy(db_file, root / db_file.name)
    return (root / "MultiWOZ_2.1.zip").as_uri(), root.as_uri() + "/{domain}_db.json"


def test_mini_is_the_default_source():
    data = load_toolwoz()
    assert data.db_dir == SHIPPED_MINI / "db"
    assert list(data.splits) == ["train", "val", "test"]


def test_multiwoz_folder_source(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "mw")
    shutil.copytree(SHIPPED_MINI / "db", tmp_path / "mw" / "db")
    data = load_toolwoz(tmp_path / "mw")
    assert data.db_dir == tmp_path / "mw" / "db"
    assert [t.id for t in data.splits["val"]] == ["PMUL0004"]


def test_task_files_round_trip_and_bad_lines(tmp_path):
    tasks = load_toolwoz("mini").splits["val"]
    write_tasks(tmp_path / "tasks_val.jsonl", tasks)
    assert read_tasks(tmp_path / "tasks_val.jsonl") == tasks
    (tmp_path / "tasks_val.jsonl").write_text('{"id": "t9", "goals": "not a list"}\n')
    with pytest.raises(DataFormatError, match=r"tasks_val\.jsonl: line 1 \(task t9\)"):
        read_tasks(tmp_path / "tasks_val.jsonl")


def test_missing_source_and_missing_db(tmp_path):
    with pytest.raises(DataFormatError, match="no such ToolWOZ source"):
        load_toolwoz(tmp_path / "nothing")
    shutil.copytree(FIXTURE, tmp_path / "mw")
    with pytest.raises(DataFormatError, match="no database"):
        load_toolwoz(tmp_path / "mw")


def test_download_multiwoz_from_a_local_archive(tmp_path):
    archive_url, db_url = _fake_remote(tmp_path / "remote")
    counts = download_multiwoz(tmp_path / "out", archive_url=archive_url, db_url=db_url, show_progress=False)
    assert counts["data.json"] == 7 and counts["testListFile.json"] == 4
    assert not (tmp_path / "out" / "MultiWOZ_2.1.zip").exists()
    assert sorted(p.name for p in (tmp_path / "out" / "db").iterdir()) == [
        "attraction_db.json", "hotel_db.json", "restaurant_db.json", "train_db.json",
    ]  # fmt: skip


def test_download_toolwoz_writes_task_files(tmp_path):
    archive_url, db_url = _fake_remote(tmp_path / "remote")
    counts = download_toolwoz(tmp_path / "out", archive_url=archive_url, db_url=db_url, show_progress=False)
    assert counts["tasks_full_test"] == 2
    data = load_toolwoz(tmp_path / "out")
    assert list(data.splits) == ["train", "val", "test", "full_test"]
    assert data.splits["train"][0].transcript


def test_download_errors_are_clear_and_leave_no_partial_file(tmp_path):
    with pytest.raises(DownloadError, match="could not download"):
        fetch((tmp_path / "absent.zip").as_uri(), tmp_path / "x.zip")
    assert not list(tmp_path.iterdir())
    archive_url, db_url = _fake_remote(tmp_path / "remote", with_lists=False)
    with pytest.raises(DownloadError, match="testListFile.json"):
        download_multiwoz(tmp_path / "out", archive_url=archive_url, db_url=db_url, show_progress=False)
    assert not (tmp_path / "out").exists(), "a failed download removes the folders it created"


def test_a_failed_download_keeps_what_was_there_and_removes_the_rest(tmp_path):
    dest = tmp_path / "envs" / "toolwoz"
    dest.mkdir(parents=True)
    (dest / "notes.txt").write_text("mine")
    archive_url, db_url = _fake_remote(tmp_path / "remote")
    broken_db = db_url.replace("{domain}", "{domain}-missing")
    with pytest.raises(DownloadError, match="could not download"):
        download_toolwoz(dest, archive_url=archive_url, db_url=broken_db, show_progress=False)
    assert sorted(p.name for p in dest.rglob("*")) == ["notes.txt"]
    with pytest.raises(DownloadError):
        download_toolwoz(tmp_path / "new" / "toolwoz", archive_url=archive_url, db_url=broken_db, show_progress=False)
    assert not (tmp_path / "new").exists()


def test_cli_mini_generate_stats_show(tmp_path):
    result = runner.invoke(app, ["data", "mini", "--dest", str(tmp_path / "mini"), "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "train: 200" in result.output
    result = runner.invoke(
        app, ["data", "generate", "--db", str(SHIPPED_MINI / "db"), "--n", "7", "--out", str(tmp_path / "g.jsonl")]
    )
    assert result.exit_code == 0, result.output
    assert len(read_tasks(tmp_path / "g.jsonl")) == 7
    result = runner.invoke(app, ["data", "stats", str(tmp_path / "mini")])
    assert result.exit_code == 0 and "200" in result.output
    result = runner.invoke(app, ["data", "show", "val", "--source", str(tmp_path / "mini"), "--index", "2"])
    assert result.exit_code == 0 and "mini_val_0002" in result.output


def test_stats_lists_the_repaired_tasks_only_when_asked(tmp_path):
    source = tmp_path / "mini"
    shutil.copytree(SHIPPED_MINI, source)
    val = read_tasks(source / "tasks_val.jsonl")
    note = "booked 'ask' is 'ask restaurant' in the database"
    val[1].details["repairs"] = {"restaurant": note}
    write_tasks(source / "tasks_val.jsonl", val)
    plain = runner.invoke(app, ["data", "stats", str(source)])
    assert plain.exit_code == 0 and "repaired val" not in plain.output
    listed = runner.invoke(app, ["data", "stats", str(source), "--repairs"])
    assert listed.exit_code == 0, listed.output
    assert [line for line in listed.output.splitlines() if line.startswith("repaired ")] == [
        f"repaired val {val[1].id} restaurant: {note}"
    ]
    as_json = runner.invoke(app, ["data", "stats", str(source), "--repairs", "--json"])
    summary = json.loads(as_json.stdout)
    assert summary["repairs"] == {"train": {}, "val": {val[1].id: {"restaurant": note}}, "test": {}}
    assert summary["splits"]["val"]["repaired"] == 1
    assert "repairs" not in json.loads(runner.invoke(app, ["data", "stats", str(source), "--json"]).stdout)


def test_cli_errors_exit_non_zero(tmp_path):
    result = runner.invoke(app, ["data", "stats", str(tmp_path / "absent")])
    assert result.exit_code == 2 and "no such ToolWOZ source" in " ".join(result.output.split())
    result = runner.invoke(app, ["data", "show", "nosplit"])
    assert result.exit_code == 2 and "no split" in result.output
    result = runner.invoke(app, ["data", "generate", "--db", str(tmp_path), "--out", str(tmp_path / "g.jsonl")])
    assert result.exit_code == 2


def test_downloaded_files_parse_as_json(tmp_path):
    archive_url, db_url = _fake_remote(tmp_path / "remote")
    download_multiwoz(tmp_path / "out", archive_url=archive_url, db_url=db_url, show_progress=False)
    assert isinstance(json.loads((tmp_path / "out" / "data.json").read_text()), dict)


def test_mini_is_generated_into_the_cache_when_not_shipped(tmp_path, monkeypatch):
    import josh.envs.toolwoz.data as data_module

    monkeypatch.setattr(data_module, "SHIPPED_MINI", tmp_path / "not-installed")
    monkeypatch.setenv("JOSH_CACHE", str(tmp_path / "cache"))
    data = load_toolwoz("mini")
    assert data.db_dir == tmp_path / "cache" / "toolwoz_mini" / "db"
    assert [t.id for t in data.splits["test"]] == [t.id for t in read_tasks(SHIPPED_MINI / "tasks_test.jsonl")]
