"""constraints-gpu.txt offline: exact pins that honour pyproject.toml (scripts/check_gpu_pins.py resolves them online)."""

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
GPU_EXTRAS = ("train", "vllm", "serve")
STACK = {"vllm", "torch", "transformers", "trl", "peft", "accelerate", "bitsandbytes", "llguidance"}


def pin_lines() -> list[Requirement]:
    """Every requirement of constraints-gpu.txt, comments and blank lines dropped."""
    text = (ROOT / "constraints-gpu.txt").read_text()
    return [Requirement(line) for raw in text.splitlines() if (line := raw.split("#", 1)[0].strip())]


def pins() -> dict[str, str]:
    """Normalised name to pinned version."""
    return {canonicalize_name(r.name): next(iter(r.specifier)).version for r in pin_lines()}


def project_requirements() -> dict[str, list[Requirement]]:
    """pyproject.toml's requirements by extra ('' for the base dependencies)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    return {extra: [Requirement(r) for r in reqs] for extra, reqs in groups.items()}


def test_every_line_is_one_exact_pin() -> None:
    reqs = pin_lines()
    for r in reqs:
        specs = list(r.specifier)
        assert not (r.extras or r.marker or r.url), f"{r}: a pin is a bare name==version"
        assert len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version, f"{r} is not exact"
    names = [canonicalize_name(r.name) for r in reqs]
    assert len(names) == len(set(names)), "a package is pinned twice"


def test_gpu_stack_and_gpu_extras_are_pinned() -> None:
    extras = project_requirements()
    wanted = STACK | {canonicalize_name(r.name) for extra in GPU_EXTRAS for r in extras[extra]}
    assert wanted <= pins().keys(), f"not pinned in constraints-gpu.txt: {sorted(wanted - pins().keys())}"


def test_pins_satisfy_pyproject_bounds() -> None:
    pinned = pins()
    clashes = [
        f"{name}=={pinned[name]} vs [{extra or 'dependencies'}] {r}"
        for extra, reqs in project_requirements().items()
        for r in reqs
        if (name := canonicalize_name(r.name)) in pinned and not r.specifier.contains(pinned[name], prereleases=True)
    ]
    assert not clashes, clashes
