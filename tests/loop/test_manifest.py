"""Stage manifests: skip a finished stage for the same inputs, resume an unfinished one, set aside a stale one."""

from __future__ import annotations

from pathlib import Path

import pytest

from josh.loop.stages.manifest import input_digest, read_manifest, run_stage


class Work:
    def __init__(self, folder: Path, fail: bool = False) -> None:
        self.folder, self.fail, self.calls = folder, fail, 0

    def __call__(self) -> None:
        self.calls += 1
        with (self.folder / "out.txt").open("a") as f:
            f.write("x")
        if self.fail:
            raise RuntimeError("killed")


def stage(folder: Path, work: Work, config: dict | None = None, inputs: dict | None = None) -> bool:
    return run_stage(
        "s", folder, config or {"a": 1}, inputs or {}, work, finished=(folder / "out.txt").is_file, log=lambda _: None
    )


def test_finished_stage_is_skipped_for_the_same_inputs(tmp_path: Path) -> None:
    folder = tmp_path / "stage"
    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    work = Work(folder)
    assert stage(folder, work, inputs={"data": data}) is True
    assert stage(folder, work, inputs={"data": data}) is False
    assert work.calls == 1 and read_manifest(folder).complete


def test_unfinished_stage_runs_again_in_place(tmp_path: Path) -> None:
    folder = tmp_path / "stage"
    with pytest.raises(RuntimeError):
        stage(folder, Work(folder, fail=True))
    assert read_manifest(folder).complete is False
    work = Work(folder)
    assert stage(folder, work) is True
    assert (folder / "out.txt").read_text() == "xx"  # partial output kept for the stage's own resume
    assert not list(tmp_path.glob("stage.stale-*"))


@pytest.mark.parametrize("change", ["config", "input"])
def test_changed_config_or_input_sets_the_old_output_aside(tmp_path: Path, change: str) -> None:
    folder = tmp_path / "stage"
    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    stage(folder, Work(folder), inputs={"data": data})
    if change == "config":
        ran = stage(folder, Work(folder), config={"a": 2}, inputs={"data": data})
    else:
        data.write_text('{"more": 1}\n')
        ran = stage(folder, Work(folder), inputs={"data": data})
    assert ran is True
    stale = list(tmp_path.glob("stage.stale-*"))
    assert len(stale) == 1 and (stale[0] / "out.txt").read_text() == "x"
    assert (folder / "out.txt").read_text() == "x"


def test_deleted_output_reruns_the_stage(tmp_path: Path) -> None:
    folder = tmp_path / "stage"
    stage(folder, Work(folder))
    (folder / "out.txt").unlink()
    work = Work(folder)
    assert stage(folder, work) is True and work.calls == 1


def test_folder_digest_ignores_trainer_checkpoints_and_ids_pass_through(tmp_path: Path) -> None:
    (tmp_path / "adapter_model.safetensors").write_bytes(b"w1")
    before = input_digest(tmp_path)
    (tmp_path / "checkpoint-5").mkdir()
    (tmp_path / "checkpoint-5" / "optimizer.pt").write_bytes(b"o")
    assert input_digest(tmp_path) == before
    (tmp_path / "adapter_model.safetensors").write_bytes(b"w2")
    assert input_digest(tmp_path) != before
    assert input_digest("smollm2") == "id:smollm2"
