"""The wheel runs anywhere: ``python -m build`` (sdist, then the wheel from it), the wheel installed into a fresh
virtual environment outside the repository, and there ``josh demo --help``, the README's model-free tour commands,
``josh eval`` on the shipped mini set, and the recipes and the mini set found as package data.

Slow (13 s on 2 cores at load 7.5): it builds the sdist and the wheel and starts josh's CLI six times in a fresh
interpreter. To stay cheap the venv gets the wheel alone (``--no-deps``) and sees the test's own environment's
packages through a path file, after its own site-packages, so ``import josh`` is the wheel's; the build runs
without isolation on this environment's setuptools (no download).

A bare install (``tests/bare_venv.py``: the wheel plus only what its core requirements pull in, no extras) runs
``josh --help``, ``josh check-env`` on every built-in environment with its defaults and ``josh rollout --agent
oracle`` on the mini set; and every command of its CLI, found by walking the installed command tree, run with only
its required arguments, either works or exits 2 with one ``error:`` line naming what is missing, never a traceback.
There a model-loading default fails at once for want of torch, so the walk loads no model.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.bare_venv import COMMAND_TREE, bare_venv
from tests.conftest import SHARED_DATA
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


OFFLINE = "http://127.0.0.1:9"  # a closed port: a command that downloads fails at once instead of fetching data
NOT_CORE = ("click", "requests", "torch", "transformers", "datasets", "vllm", "ray", "tau2", "openenv", "jsonschema")


@pytest.fixture(scope="module")
def bare(wheel: Path, tmp_path_factory) -> Path:
    """The wheel installed with its core dependencies only (``tests/bare_venv.py``)."""
    return bare_venv(wheel, tmp_path_factory.mktemp("bare") / "v")


def bare_env(venv: Path, home: Path) -> dict[str, str]:
    """No PYTHONPATH, a home and cache of its own, no network, and the τ-bench data where this checkout has it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.lower().endswith("_proxy")}
    env.update(HOME=str(home), JOSH_CACHE=str(home / "cache"), HF_HUB_OFFLINE="1", PIP_INDEX_URL=f"{OFFLINE}/simple")
    env.update(http_proxy=OFFLINE, https_proxy=OFFLINE, PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    for domain in ("retail", "airline"):
        env[f"JOSH_{domain.upper()}_DATA"] = str(SHARED_DATA / "taubench" / domain)
    return env


def josh(venv: Path, cwd: Path, *args: str | Path) -> subprocess.CompletedProcess:
    """``josh ARGS`` from the bare venv in ``cwd``."""
    env = bare_env(venv, cwd / "home")
    argv = [venv / "bin" / "josh", *args]
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def worked_or_named_what_is_missing(done: subprocess.CompletedProcess) -> str:
    """Why ``done`` is neither a success nor an exit 2 whose one ``error:`` line ends stderr ('' when it is)."""
    output = done.stdout + done.stderr
    if "Traceback" in output or "bug in josh" in output:
        return "a traceback or an unexpected error"
    if done.returncode == 0:
        return ""
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if done.returncode != 2 or len(errors) != 1 or lines[-1] != errors[0]:
        return f"exit {done.returncode} without one closing error line"
    return ""


def test_the_bare_install_sees_only_the_core_dependencies(bare: Path, tmp_path: Path) -> None:
    here = [name for name in NOT_CORE if importlib.util.find_spec(name) is not None]
    assert {"click", "requests", "torch"} <= set(here), "this environment has the packages the bare one must lack"
    probe = "import importlib.util as u, sys; print([n for n in sys.argv[1:] if u.find_spec(n)])"
    found = call([bare / "bin" / "python", "-c", probe, *here, "typer", "pydantic"], tmp_path, bare_env(bare, tmp_path))
    assert found.strip() == "['typer', 'pydantic']"


def test_the_bare_install_runs_help_check_env_and_an_oracle_rollout(bare: Path, tmp_path: Path) -> None:
    assert SHARED_DATA.is_dir(), "../shared/data holds the τ-bench data the retail and airline checks read"
    assert josh(bare, tmp_path, "--help").returncode == 0
    listing = "from josh.envs import ENVIRONMENTS as E; print(*E.names())"
    names = call([bare / "bin" / "python", "-c", listing], tmp_path, bare_env(bare, tmp_path))
    assert {"toolwoz", "retail", "airline", "tau2-retail"} <= set(names.split())
    for name in names.split():
        done = josh(bare, tmp_path, "check-env", name)
        if done.returncode != 0:  # only an environment whose extra is missing may stop, naming it
            assert done.returncode == 2 and "pip install 'josh-agents[" in done.stderr, f"{name}: {done.stderr}"
        assert not worked_or_named_what_is_missing(done), f"check-env {name}:\n{done.stdout}{done.stderr}"
    done = josh(bare, tmp_path, "rollout", "--agent", "oracle", "--out", "oracle")
    assert done.returncode == 0, done.stdout + done.stderr
    trees = [json.loads(line) for line in (tmp_path / "oracle/trees.jsonl").read_text().splitlines()]
    splits = {t["task_id"].rsplit("_", 1)[0] for t in trees}
    assert len(trees) == 200 and splits == {"mini_train"}  # every task of the mini set's train split


def required_values(command: str, name: str, workdir: Path) -> list[str]:
    """Values for a required parameter: local data and fresh folders in ``workdir``."""
    if name == "recipe":  # a command's own kind of recipe: a loop's, or a training method's
        recipes = {"loop": "science-cpu", **{f"train {k}": f"tiny-{k}" for k in ("sft", "kto", "dpo", "tree", "grpo")}}
        assert command in recipes, f"`josh {command}` requires a recipe: name one for the walk"
        return [str(ROOT / "recipes" / f"{recipes[command]}.yaml")]
    values = {
        "out": [str(workdir / f"{command.replace(' ', '-')}-out")],
        "run": [str(workdir / "rollout")],
        "run_dir": [str(workdir / "rollout")],
        "models": [str(workdir / "eval-a"), str(workdir / "eval-b")],
        "runs": [str(workdir / "eval-a"), str(workdir / "eval-b")],
        "run_dirs": [str(workdir / "eval-a"), str(workdir / "eval-b")],
        "agents": ["oracle"],
        "users": ["agenda"],
        "name": ["toolwoz"],
        "db": [str(ROOT / "envs" / "toolwoz_mini" / "db")],
        "split": ["test"],
    }
    assert name in values, f"`josh {command}` requires {name}: give the walk a value for it"
    return values[name]


def test_every_command_with_only_its_required_arguments_works_or_names_what_is_missing(
    bare: Path, tmp_path: Path
) -> None:
    for folder in ("rollout", "eval-a", "eval-b"):  # the runs the commands that read one are given
        done = josh(bare, tmp_path, folder.split("-")[0], "--agent", "oracle", "--limit", "2", "--out", folder)
        assert done.returncode == 0, done.stdout + done.stderr
    tree = json.loads(call([bare / "bin" / "python", "-c", COMMAND_TREE], tmp_path, bare_env(bare, tmp_path)))
    assert len(tree) > 20 and ["check-env"] in [c["path"] for c in tree]
    assert not [(c["path"], c["help"]) for c in tree if c["help"][0] != 0], "every command's --help works"
    failed = []
    for command in tree:
        path = " ".join(command["path"])
        args = list(command["path"])
        for param in command["required"]:
            values = required_values(path, param["name"], tmp_path)
            for value in values if param["many"] else values[:1]:
                args += [value] if param["kind"] == "argument" else [param["flag"], value]
        done = josh(bare, tmp_path, *args)
        if why := worked_or_named_what_is_missing(done):
            failed.append(f"josh {' '.join(args)}: {why}\n{done.stdout[-800:]}{done.stderr[-800:]}")
    assert not failed, "\n\n".join(failed)
