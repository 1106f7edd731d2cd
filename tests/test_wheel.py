"""The wheel runs anywhere: ``python -m build`` (sdist, then the wheel from it), the wheel installed into a fresh
virtual environment outside the repository, and there ``josh demo --help``, the README's model-free tour commands,
``josh eval`` on the shipped mini set, and the recipes and the mini set found as package data.

Slow (13 s on 2 cores at load 7.5): it builds the sdist and the wheel and starts josh's CLI six times in a fresh
interpreter. To stay cheap the venv gets the wheel alone (``--no-deps``) and sees the test's own environment's
packages through a path file, after its own site-packages, so ``import josh`` is the wheel's; the build runs
without isolation on this environment's setuptools (no download).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.docs.test_tour import needs_model, walkthrough

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def call(argv: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel ``python -m build`` makes from a copy of the checkout's files (the checkout stays clean)."""
    pytest.importorskip("build")
    tmp = tmp_path_factory.mktemp("build")
    source = tmp / "src"
    listed = call(["git", "ls-files", "-co", "--exclude-standard"], ROOT).splitlines()
    for name in listed:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    call([sys.executable, "-m", "build", "--no-isolation", "--outdir", tmp / "dist", source], tmp)
    (found,) = (tmp / "dist").glob("*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory) -> Path:
    """A fresh venv outside the repository with the wheel installed; the dependencies come from this environment."""
    folder = tmp_path_factory.mktemp("venv") / "v"
    call([sys.executable, "-m", "venv", "--without-pip", folder], folder.parent)
    purelib = Path(sysconfig.get_path("purelib"))
    (site,) = (folder / "lib").glob("python*/site-packages")
    (site / "josh_test_deps.pth").write_text(f"{purelib}\n")
    call(
        [sys.executable, "-m", "pip", "--python", folder / "bin" / "python", "install", "-q", "--no-deps", wheel],
        folder,
    )
    return folder


def test_the_wheel_is_named_josh_agents_and_carries_its_data(wheel: Path) -> None:
    assert wheel.name.startswith("josh_agents-")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"josh/_bundled/recipes/demo-cpu.yaml", "josh/_bundled/recipes/tiny-sft.yaml"} <= names
    assert "josh/_bundled/envs/toolwoz_mini/tasks_test.jsonl" in names
    assert "josh/training/templates/llama3_tools.jinja" in names
    assert any(n.startswith("josh/agents/prompts/") and n.endswith(".txt") for n in names)


def test_josh_runs_from_the_installed_wheel(venv: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    josh = venv / "bin" / "josh"
    where = call(
        [venv / "bin" / "python", "-c", "import josh, josh.loop.demo as d, josh.envs.toolwoz.data as t, "
         "josh.training.recipe as r; r.load_recipe('recipes/tiny-sft.yaml'); "
         "print(josh.__file__, d.demo_recipe(), t.mini_dir(), sep='\\n')"],
        tmp_path, env,
    ).split()  # fmt: skip
    assert all(Path(p).is_relative_to(venv) for p in where), where  # the wheel's code, recipe and mini set
    assert "recipe" in call([josh, "demo", "--help"], tmp_path, env).lower()
    for argv in walkthrough():
        if not needs_model(argv):
            call([josh, *argv[1:]], tmp_path, env)
    assert len((tmp_path / "rollouts/walk/sft.jsonl").read_text().splitlines()) == 4
    assert (tmp_path / "rollouts/walk/README.md").is_file() and (tmp_path / "rollouts/walk/view/index.html").is_file()
    call([josh, "eval", "--agent", "oracle", "--user", "agenda", "--limit", "3", "--out", "runs/wheel"], tmp_path, env)
    assert (tmp_path / "runs/wheel/summary.json").is_file()
