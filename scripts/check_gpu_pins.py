#!/usr/bin/env python3
"""Resolve josh's GPU extras under constraints-gpu.txt from PyPI metadata alone (uv pip compile; nothing installed)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = "constraints-gpu.txt"
EXTRAS = ("train", "vllm", "serve")
PYTHON = "3.11"  # vllm 0.33.0 needs Python >= 3.11
PLATFORM = "x86_64-manylinux_2_31"  # glibc 2.31: llguidance's x86_64 wheels need it, vLLM's need 2.28
UV_VERSION = "0.13.9"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def canonical(name: str) -> str:
    """The PEP 503 normalised form of a project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, str]:
    """Map each ``name==version`` line of a requirements text to its version, by normalised name."""
    return {canonical(m[1]): m[2] for line in text.splitlines() if (m := PIN.match(line))}


def uv() -> Path:
    """uv at UV_VERSION, installed once into a throwaway virtualenv under the temp directory."""
    env = Path(tempfile.gettempdir()) / f"josh-uv-{UV_VERSION}"
    exe = env / "bin" / "uv"
    if not exe.exists():
        venv.create(env, with_pip=True)
        subprocess.run([env / "bin" / "python", "-m", "pip", "install", "-q", f"uv=={UV_VERSION}"], check=True)
    return exe


def main() -> int:
    """Resolve, then require every pin in the resolution at its pinned version; 1 with the reason when not."""
    target = f"josh-agents[{','.join(EXTRAS)}] with -c {CONSTRAINTS} for CPython {PYTHON} on {PLATFORM}, wheels only"
    cmd = [str(uv()), "pip", "compile", "pyproject.toml", *(f"--extra={e}" for e in EXTRAS)]
    cmd += [f"--constraints={CONSTRAINTS}", f"--python-version={PYTHON}", f"--python-platform={PLATFORM}"]
    cmd += ["--no-build", "--no-header", "--no-annotate", "--quiet"]
    print(f"resolving {target} (uv {UV_VERSION}, package metadata only)")
    print("$", " ".join(cmd), flush=True)
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr)
        print(f"FAIL: {target} does not resolve (uv's reason above)", file=sys.stderr)
        return 1
    wanted, got = pins((ROOT / CONSTRAINTS).read_text()), pins(done.stdout)
    off = [
        f"{name}=={version} resolved as {got.get(name, 'absent')}"
        for name, version in wanted.items()
        if got.get(name) != version
    ]
    if off:
        print(f"FAIL: pins of {CONSTRAINTS} not honoured: " + "; ".join(off), file=sys.stderr)
        return 1
    print(
        f"OK: {len(got)} packages resolve; all {len(wanted)} pins hold: "
        + ", ".join(f"{n}=={v}" for n, v in wanted.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
