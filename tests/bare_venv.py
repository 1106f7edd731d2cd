"""A virtual environment holding a wheel and only what its core requirements pull in (no extras), without a download.

The distributions come from the test's own environment: the wheel's ``Requires-Dist`` lines (markers evaluated with
no extra), then theirs, transitively (with the extras a requirement asks of them), each distribution's top-level
files and ``.dist-info`` linked into one folder the venv reads through a path file. So the venv sees exactly the
core closure, at the versions this environment has: a module josh imports from anything else (an extra, or a
package another library happened to install) is missing there, as on a user's bare ``pip install``.
"""

from __future__ import annotations

import email
import importlib.metadata
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def wheel_requirements(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` lines of a wheel's metadata."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
        return email.message_from_bytes(archive.read(name)).get_all("Requires-Dist") or []


def core_closure(requirements: list[str]) -> dict[str, importlib.metadata.Distribution]:
    """Every distribution ``requirements`` need with no extra of their own, transitively, from this environment."""
    found: dict[str, importlib.metadata.Distribution] = {}
    seen: set[tuple[str, str]] = set()
    todo = [(line, "") for line in requirements]
    while todo:
        line, extra = todo.pop()
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        found[name] = importlib.metadata.distribution(requirement.name)
        for wanted in ("", *requirement.extras):
            if (name, wanted) not in seen:
                seen.add((name, wanted))
                todo += [(sub, wanted) for sub in found[name].requires or []]
    return found


def link_distributions(distributions: dict[str, importlib.metadata.Distribution], folder: Path) -> None:
    """Link each distribution's top-level packages, modules and metadata into ``folder``."""
    folder.mkdir(parents=True)
    for name, dist in distributions.items():
        tops = {file.parts[0] for file in dist.files or []} - {"..", "__pycache__"}
        assert tops, f"{name} lists no files (no RECORD): cannot tell what it installs"
        for top in sorted(t for t in tops if not t.endswith(".pth")):
            target = folder / top
            source = Path(dist.locate_file(top))
            if target.exists():
                assert target.resolve() == source.resolve() or not source.is_dir(), f"{name}: {top} is shared"
                continue
            target.symlink_to(source)


def bare_venv(wheel: Path, folder: Path) -> Path:
    """A venv at ``folder`` with ``wheel`` installed and only its core closure visible; ``pip check`` passes there."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", folder], check=True)
    deps = folder / "core-deps"
    link_distributions(core_closure(wheel_requirements(wheel)), deps)
    (site,) = (folder / "lib").glob("python*/site-packages")
    (site / "core_deps.pth").write_text(f"{deps}\n")
    pip = [sys.executable, "-m", "pip", "--python", folder / "bin" / "python"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # an earlier test's plugin on it is not core
    subprocess.run([*pip, "install", "-q", "--no-deps", wheel], check=True, capture_output=True, env=env)
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, env=env)
    assert checked.returncode == 0, f"pip check in the bare venv:\n{checked.stdout}{checked.stderr}"
    return folder


COMMAND_TREE = """
import json, typer.main
from typer.testing import CliRunner
from josh.cli.main import app

def walk(command, path):
    for name, sub in sorted((getattr(command, "commands", None) or {}).items()):
        yield from walk(sub, [*path, name])
    if not getattr(command, "commands", None):
        params = [
            {"name": p.name, "kind": p.param_type_name, "flag": p.opts[0], "many": p.nargs == -1 or getattr(p, "multiple", False)}
            for p in command.params if p.required
        ]
        shown = CliRunner().invoke(app, [*path, "--help"])
        yield {"path": path, "required": params, "help": [shown.exit_code, repr(shown.exception), shown.output[-600:]]}

print(json.dumps(list(walk(typer.main.get_command(app), []))))
"""
"""A script printing the installed ``josh`` command tree: each command's path, its required parameters and what its
``--help`` gave (exit code, exception, the output's end), in process."""
