"""Loading airline data folders with one clear error per bad record, and the download command."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs.airline import AirlineDataError, AirlineEnv, download, load_tasks
from josh.envs.airline.download import UPSTREAM_DIR, DownloadError, download_airline
from josh.envs.retail.download import raw_url
from tests.airline_data import ANN, RESERVATIONS, TASKS, USERS, write_airline
from tests.fakes.upstream import serve_upstream, upstream_files


def task_source(tasks: list[dict[str, Any]]) -> str:
    """An upstream-style ``tasks_test.py`` holding ``tasks``."""
    rows = []
    for task in tasks:
        actions = ", ".join(f"Action(name={a['name']!r}, kwargs={a['kwargs']!r})" for a in task["actions"])
        rows.append(
            f"    Task(annotator='0', user_id={task['user_id']!r}, instruction={task['instruction']!r},\n"
            f"         actions=[{actions}], outputs={task['outputs']!r}),"
        )
    return "from tau_bench.types import Action, Task\n\nTASKS = [\n" + "\n".join(rows) + "\n]\n"


def fake_upstream(folder: Path) -> dict[str, bytes]:
    tasks = {"tasks_test.py": task_source(TASKS).encode()}
    return upstream_files(UPSTREAM_DIR, folder, ("users", "reservations", "flights"), tasks)


def test_download_airline_writes_a_loadable_folder(tmp_path: Path) -> None:
    upstream = fake_upstream(write_airline(tmp_path / "source"))
    written = download_airline(tmp_path / "airline", fetch=upstream.__getitem__)
    names = ["users.json", "reservations.json", "flights.json", "policy.md", "tasks_test.json", "LICENSE.txt"]
    assert sorted(p.name for p in written) == sorted(names)
    env = AirlineEnv(tmp_path / "airline")
    assert [t.id for t in env.tasks("test")] == ["airline-test-0", "airline-test-1"]
    assert env.tasks("test")[0].goals[0].name == "cancel_reservation" and env.tasks("test")[1].details["outputs"] == [
        "20"
    ]


def test_failed_download_writes_nothing(tmp_path: Path) -> None:
    upstream = fake_upstream(write_airline(tmp_path / "source"))
    bad = copy.deepcopy(TASKS)
    bad[1]["actions"][0]["name"] = "upgrade_seat"
    upstream[raw_url(f"{UPSTREAM_DIR}/tasks_test.py")] = task_source(bad).encode()
    with pytest.raises(DownloadError, match="task 1: action 0 is the unknown action 'upgrade_seat'"):
        download_airline(tmp_path / "airline", fetch=upstream.__getitem__)
    upstream[raw_url(f"{UPSTREAM_DIR}/tasks_test.py")] = b"TASKS = [Task(user_id=evil(), instruction='', actions=[])]"
    with pytest.raises(DownloadError):
        download_airline(tmp_path / "airline", fetch=upstream.__getitem__)
    assert not (tmp_path / "airline").exists()


def test_cli_download_airline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    upstream = fake_upstream(write_airline(tmp_path / "source"))
    serve_upstream(monkeypatch, download, upstream)
    ok = CliRunner().invoke(app, ["data", "download", "airline", "--dest", str(tmp_path / "ok")])
    assert ok.exit_code == 0 and "6 files written" in ok.output and "--env airline" in ok.output
    bad = CliRunner().invoke(
        app, ["data", "download", "airline", "--dest", str(tmp_path / "bad"), "--commit", "0" * 40]
    )
    assert bad.exit_code == 2 and "404" in bad.output and not (tmp_path / "bad").exists()


def _with_task(**changes: Any) -> list[dict[str, Any]]:
    return [TASKS[0], {**TASKS[1], **changes}]


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        (
            _with_task(actions=[{"name": "upgrade_seat", "kwargs": {}}]),
            "task 1: action 0 is the unknown action 'upgrade_seat'",
        ),
        (_with_task(user_id="nobody_0"), "task 1: user id 'nobody_0' is not in users.json"),
        (
            _with_task(actions=[{"name": "cancel_reservation", "kwargs": {"reservation": "AAA111"}}]),
            "task 1: action 0 \\(cancel_reservation\\): cancel_reservation\\(\\) got an unexpected keyword argument",
        ),
        (_with_task(instruction=None), "task 1 is malformed"),
    ],
)
def test_bad_tasks_name_the_file_and_the_task(tmp_path: Path, tasks: list, message: str) -> None:
    folder = write_airline(tmp_path, tasks_test=tasks)
    env = AirlineEnv(folder)
    with pytest.raises(AirlineDataError, match=f"tasks_test.json: {message}"):
        env.tasks("test")


def test_legacy_arguments_key_is_read_as_kwargs(tmp_path: Path) -> None:
    legacy = [{**TASKS[0], "actions": [{"name": "cancel_reservation", "arguments": {"reservation_id": "BBB222"}}]}]
    env = AirlineEnv(write_airline(tmp_path, tasks_test=legacy))
    assert env.tasks("test")[0].goals[0].parameters == {"reservation_id": "BBB222"}


def _reservation(rid: str, **changes: Any) -> dict[str, Any]:
    return {**RESERVATIONS, rid: {**RESERVATIONS[rid], **changes}}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"reservations": _reservation("AAA111", cabin="first")},
            "reservations.json: reservation AAA111: cabin",
        ),
        (
            {"reservations": _reservation("BBB222", passengers=[{"first_name": "A"}])},
            "reservation BBB222: passengers.0.last_name",
        ),
        (
            {"reservations": _reservation("AAA111", total_baggages="1")},
            "reservation AAA111: total_baggages",
        ),
        (
            {"reservations": _reservation("CCC333", user_id="ghost_9")},
            "reservation 'CCC333' names user 'ghost_9', who is not in users.json",
        ),
        ({"reservations": _reservation("CCC333", reservation_id="DDD444")}, "reservation 'CCC333' holds id 'DDD444'"),
        (
            {"users": {**USERS, ANN: {**USERS[ANN], "payment_methods": {"x": {"source": "cash", "id": "x"}}}}},
            "users.json: user ann_lee_1: payment_methods",
        ),
        ({"flights": [1, 2]}, "flights.json must hold a JSON object"),
    ],
)
def test_bad_records_name_the_file_and_the_record(tmp_path: Path, overrides: dict, message: str) -> None:
    with pytest.raises(AirlineDataError, match=message):
        AirlineEnv(write_airline(tmp_path, **overrides))


def test_missing_files_and_unknown_splits(tmp_path: Path) -> None:
    with pytest.raises(AirlineDataError, match="josh data download airline"):
        AirlineEnv(tmp_path / "nowhere")
    folder = write_airline(tmp_path / "ok")
    with pytest.raises(AirlineDataError, match="only: test"):
        load_tasks(folder, "train", USERS)
    (folder / "tasks_test.json").write_text("{not json")
    with pytest.raises(AirlineDataError, match="cannot read"):
        load_tasks(folder, "test", USERS)
    (folder / "tasks_test.json").write_text(json.dumps({"user_id": ANN}))
    with pytest.raises(AirlineDataError, match="JSON list"):
        load_tasks(folder, "test", USERS)


def test_a_folder_changed_in_the_same_process_is_read_again(tmp_path: Path) -> None:
    from josh.envs.airline.db import load_db

    first = load_db(write_airline(tmp_path))
    assert load_db(tmp_path) is first
    (tmp_path / "policy.md").write_text("# Airline Agent Policy\n\nchanged\n")
    assert load_db(tmp_path).policy.endswith("changed\n") and not first.policy.endswith("changed\n")
