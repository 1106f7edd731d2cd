"""The paper's ToolWOZ from the authors' wheel: the real download and conversion (slow, once per session) and the
failures (unreachable index, a wheel that is not the pinned one, a folder that is not an install) with pip run for
real against indexes that fail."""

import json
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli import app
from josh.envs.toolwoz import download as github
from josh.envs.toolwoz.data import load_toolwoz
from josh.envs.toolwoz.multiwoz import DataFormatError
from josh.envs.toolwoz.paper_data import MANIFEST, install_paper_toolwoz, paper_dir
from josh.envs.toolwoz.paper_package import WHEEL, WHEEL_SHA256, PaperPackageError, paper_wheel, sha256_of, wheel_dir

runner = CliRunner()


@pytest.fixture
def no_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh josh cache, and pip pointed at an index nothing listens on (no other index, no local wheels)."""
    monkeypatch.setenv("JOSH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    return tmp_path / "cache"


def _leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_an_unreachable_index_is_one_line_and_leaves_nothing(no_index: Path) -> None:
    with pytest.raises(PaperPackageError, match=r"could not download josh-train==0\.1\.4 .*Connection refused"):
        paper_wheel()
    result = runner.invoke(app, ["data", "download", "toolwoz", "--source", "pypi"])
    assert result.exit_code == 2 and "error: could not download josh-train==0.1.4" in result.output
    assert _leftovers(no_index) == []


def test_a_wheel_that_is_not_the_pinned_one_is_refused(no_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    links = no_index.parent / "links"
    links.mkdir()
    with zipfile.ZipFile(links / WHEEL, "w") as wheel:  # a real wheel of that name and version, other content
        info = "josh_train-0.1.4.dist-info"
        wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: josh-train\nVersion: 0.1.4\n")
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    with pytest.raises(PaperPackageError, match=f"not the pinned {WHEEL_SHA256}"):
        paper_wheel()
    assert _leftovers(no_index) == []
    wheel_dir().mkdir(parents=True, exist_ok=True)
    (wheel_dir() / WHEEL).write_bytes(b"a cached wheel cut short")  # a damaged cached copy is fetched again
    with pytest.raises(PaperPackageError, match="not the pinned"):
        paper_wheel()


def test_the_named_source_says_how_to_install_it(no_index: Path) -> None:
    with pytest.raises(DataFormatError, match=r"is not installed: run `josh data download toolwoz --source pypi`"):
        load_toolwoz("toolwoz")
    paper_dir().mkdir(parents=True)
    (paper_dir() / MANIFEST).write_text(json.dumps({"conversion": 0}))
    with pytest.raises(DataFormatError, match="is from an older josh"):
        load_toolwoz("toolwoz")


def test_a_folder_that_is_not_an_install_is_never_replaced(no_index: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(DataFormatError, match="is not an install of the paper's ToolWOZ"):
        install_paper_toolwoz(mine)
    assert (mine / "notes.txt").read_text() == "keep"


def test_github_failing_falls_back_to_the_package_index(no_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(dest: Path, **_: object) -> dict[str, int]:
        raise github.DownloadError("could not download https://raw.githubusercontent.com/...: unreachable")

    monkeypatch.setattr(github, "download_toolwoz", unreachable)
    result = runner.invoke(app, ["data", "download", "toolwoz"])
    assert "falling back to the package index" in result.output
    assert result.exit_code == 2 and "could not download josh-train==0.1.4" in result.output
    github_only = runner.invoke(app, ["data", "download", "toolwoz", "--source", "github"])
    assert github_only.exit_code == 2 and "falling back" not in github_only.output


@pytest.mark.slow
def test_the_paper_release_installs_once_and_loads_by_name(paper_install, paper_toolwoz: Path) -> None:
    assert sha256_of(paper_wheel()) == WHEEL_SHA256
    assert not any(p.name.startswith(".") for p in paper_install.cache.rglob("*"))  # no staging, no part files
    data = load_toolwoz("toolwoz")
    assert {split: len(tasks) for split, tasks in data.splits.items()} == {
        "train": 6251,
        "val": 793,
        "test": 450,
        "full_test": 805,
    }
    assert data.db_dir == paper_toolwoz / "db"
    assert data.splits["test"][0].id == "MUL0003" and [t.id for t in data.splits["test"]] == [
        t.id for t in data.splits["full_test"][:450]
    ]
    manifest = json.loads((paper_toolwoz / MANIFEST).read_text())
    assert manifest["wheel_sha256"] == WHEEL_SHA256 and manifest["counts"]["tasks_test"] == 450
    assert install_paper_toolwoz() == manifest["counts"]  # a current install is left as it is
    stats = runner.invoke(app, ["data", "stats", "toolwoz"])
    assert stats.exit_code == 0 and "ToolWOZ source toolwoz" in stats.output


@pytest.mark.slow
def test_an_interrupted_install_leaves_no_source_and_the_rerun_resumes(paper_install) -> None:
    left = paper_install.left_by_interruption
    assert not any(name.startswith("toolwoz/") for name in left)  # the named source was not made
    assert "josh-train/" + WHEEL in left and ".toolwoz.partial/data.json" in left  # kept for the rerun
    assert not any(name.endswith(".part") for name in left)


@pytest.mark.slow
@pytest.mark.parametrize("split", ["test", "val"])
def test_the_oracle_completes_every_task_of_the_paper_release(paper_toolwoz: Path, tmp_path: Path, split: str) -> None:
    out = tmp_path / "run"
    args = ["eval", "--env", "toolwoz", "--data", "toolwoz", "--split", split, "--agent", "oracle", "--user", "agenda"]
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == {"test": 450, "val": 793}[split]
    assert [r["task_id"] for r in rows if r["reward"] != 1.0] == []
