"""The paper's ToolWOZ, fetched from the package index and converted once per test session (slow tests only)."""

import json
import os
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest


class PaperInstall(NamedTuple):
    """A josh cache holding the paper's ToolWOZ, and what an install interrupted during conversion left first."""

    cache: Path
    left_by_interruption: list[str]


@pytest.fixture(scope="session")
def paper_install(tmp_path_factory: pytest.TempPathFactory, paper_wheel: Path) -> PaperInstall:
    """Install into a fresh cache, interrupting the first try at its conversion (Ctrl-C), then rerunning it. The
    cache starts with the session's verified wheel (``paper_wheel``, which tested the download), as a second
    install on a machine finds it. Under pytest-xdist the workers share it (read-only): the first to ask installs
    it under a file lock, so the paper modules pay for one install whichever workers they land on."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root  # the session's folder, not the worker's
    cache, record = root / "paper-josh-cache", root / "paper-josh-cache.json"
    with FileLock(f"{cache}.lock"):
        if not record.is_file():
            left = _install(cache, paper_wheel)
            record.write_text(json.dumps(left))
    return PaperInstall(cache, json.loads(record.read_text()))


def _install(cache: Path, paper_wheel: Path) -> list[str]:
    """The install of ``paper_install`` into ``cache``; what the interrupted first try left there."""
    from josh.envs.toolwoz import paper_data, paper_package

    wheels = cache / paper_package.PACKAGE
    wheels.mkdir(parents=True)
    shutil.copyfile(paper_wheel, wheels / paper_package.WHEEL)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JOSH_CACHE", str(cache))

        def interrupted(staging: Path) -> dict[str, int]:
            raise KeyboardInterrupt

        patch.setattr(paper_data, "_convert", interrupted)
        with pytest.raises(KeyboardInterrupt):
            paper_data.install_paper_toolwoz()
        left = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())
        patch.undo()
        patch.setenv("JOSH_CACHE", str(cache))
        paper_data.install_paper_toolwoz()
    return left


@pytest.fixture
def paper_toolwoz(paper_install: PaperInstall, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The installed named source ``toolwoz`` (``$JOSH_CACHE`` pointed at the session's cache)."""
    from josh.envs.toolwoz.paper_data import paper_dir

    monkeypatch.setenv("JOSH_CACHE", str(paper_install.cache))
    return paper_dir()
