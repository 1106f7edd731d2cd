"""Loading retail data folders (with clear errors) and the download command's safe task-file converter."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs.retail import RetailDataError, RetailEnv, download, load_tasks
from josh.envs.retail.download import UPSTREAM_DIR, DownloadError, download_retail, raw_url, tasks_from_python
from tests.fakes.upstream import serve_upstream, upstream_files

TASK_SOURCE = """
from tau_bench.types import Action, Task

TASKS_TEST = [
    Task(
        annotator="0",
        user_id="ann_lee_1",
        instruction="You are Ann. " "You want a refund.",
        actions=[
            Action(name="cancel_pending_order", kwargs={"order_id": "#W1", "reason": "no longer needed"}),
            Action(name="calculate", kwargs={"expression": "-1 + 2"}),
        ],
        outputs=["42"],
    ),
    Task(user_id="bo_ma_2", instruction="Hi", actions=[]),
]
"""


def test_tasks_from_python_reads_literals_only() -> None:
    tasks = tasks_from_python(TASK_SOURCE)
    assert tasks[0]["instruction"] == "You are Ann. You want a refund."
    assert tasks[0]["actions"][0] == {
        "name": "cancel_pending_order",
        "kwargs": {"order_id": "#W1", "reason": "no longer needed"},
    }
    assert tasks[1] == {"outputs": [], "user_id": "bo_ma_2", "instruction": "Hi", "actions": []}


@pytest.mark.parametrize(
    "source",
    [
        "TASKS = [Task(user_id=__import__('os').getcwd(), instruction='', actions=[])]",
        "TASKS = [Task(user_id=name, instruction='', actions=[])]",
        "TASKS = [Task('positional', instruction='', actions=[])]",
        "TASKS = [Task(**extra)]",
        "TASKS = [{'user_id': 'x'}]",
        "A = []\nB = []",
        "TASKS = [",
    ],
)
def test_tasks_from_python_rejects_anything_else(source: str) -> None:
    with pytest.raises(DownloadError):
        tasks_from_python(source)


def fake_upstream(shared_data: Path) -> dict[str, bytes]:
    tasks = {f"tasks_{split}.py": TASK_SOURCE.encode() for split in ("train", "dev", "test")}
    return upstream_files(UPSTREAM_DIR, shared_data / "taubench" / "retail", ("users", "orders", "products"), tasks)


def test_download_retail_writes_a_loadable_folder(shared_data: Path, tmp_path: Path) -> None:
    upstream = fake_upstream(shared_data)
    written = download_retail(tmp_path / "retail", fetch=upstream.__getitem__)
    assert sorted(p.name for p in written) == sorted(
        [
            "users.json",
            "orders.json",
            "products.json",
            "policy.md",
            "tasks_train.json",
            "tasks_dev.json",
            "tasks_test.json",
            "LICENSE.txt",
        ]
    )
    env = RetailEnv(tmp_path / "retail")
    assert env.tasks("test")[0].goals[0].name == "cancel_pending_order"
    assert len(env.db.orders) == 1000


def test_failed_download_writes_nothing(shared_data: Path, tmp_path: Path) -> None:
    upstream = fake_upstream(shared_data)
    upstream[raw_url(f"{UPSTREAM_DIR}/tasks_dev.py")] = b"TASKS = [Task(user_id=evil(), instruction='', actions=[])]"
    with pytest.raises(DownloadError):
        download_retail(tmp_path / "retail", fetch=upstream.__getitem__)
    assert not (tmp_path / "retail").exists()


def test_missing_folder_names_the_download_command(tmp_path: Path) -> None:
    with pytest.raises(RetailDataError, match="josh data download retail"):
        RetailEnv(tmp_path)


def test_bad_task_files_give_clear_errors(shared_data: Path, tmp_path: Path) -> None:
    for name in ("users.json", "orders.json", "products.json", "policy.md"):
        shutil.copy(shared_data / "taubench" / "retail" / name, tmp_path / name)
    (tmp_path / "tasks_dev.json").write_text(json.dumps([{"user_id": "x"}]))
    (tmp_path / "tasks_test.json").write_text("{not json")
    with pytest.raises(RetailDataError, match="task 0 is malformed"):
        load_tasks(tmp_path, "dev")
    with pytest.raises(RetailDataError, match="cannot read"):
        load_tasks(tmp_path, "test")
    with pytest.raises(RetailDataError, match="unknown retail split"):
        load_tasks(tmp_path, "validation")
    (tmp_path / "orders.json").write_text("[1, 2]")
    with pytest.raises(RetailDataError, match="JSON object"):
        RetailEnv(tmp_path)


def test_cli_download_retail(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    upstream = fake_upstream(shared_data)
    serve_upstream(monkeypatch, download, upstream)
    ok = CliRunner().invoke(app, ["data", "download", "retail", "--dest", str(tmp_path / "ok")])
    assert ok.exit_code == 0 and "8 files written" in ok.output
    bad = CliRunner().invoke(app, ["data", "download", "retail", "--dest", str(tmp_path / "bad"), "--commit", "0" * 40])
    assert bad.exit_code == 2 and "404" in bad.output


def test_a_folder_changed_in_the_same_process_is_read_again(shared_data: Path, tmp_path: Path) -> None:
    from josh.envs.retail.db import DATA_FILES, load_db

    for name in DATA_FILES:
        (tmp_path / name).symlink_to(shared_data / "taubench" / "retail" / name)
    first = load_db(tmp_path)
    assert load_db(tmp_path) is first
    (tmp_path / "policy.md").unlink()
    (tmp_path / "policy.md").write_text("changed policy")
    assert load_db(tmp_path).policy == "changed policy" and first.policy != "changed policy"
