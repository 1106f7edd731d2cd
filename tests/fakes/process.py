"""``start_josh``: the ``josh`` command line of this checkout as a child process that Ctrl-C stops."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_josh(args: list[str], **env: str) -> subprocess.Popen:
    """``python -m josh ARGS`` from this checkout, output piped as text. The child gets the default SIGINT a
    terminal gives: a suite started in the background (``cmd &``) hands it an ignored SIGINT, which Python keeps."""
    return subprocess.Popen(
        [sys.executable, "-m", "josh", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_default_sigint,
    )
