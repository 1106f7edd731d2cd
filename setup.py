"""Build hook: the wheel carries ``recipes/`` and ``envs/toolwoz_mini/`` as package data under ``josh/_bundled/``
(``josh.util.bundled`` finds them there); everything else is in ``pyproject.toml``."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED_DIRS = ("recipes", "envs/toolwoz_mini")  # josh.util.bundled.BUNDLED_DIRS


class BuildWithBundledData(build_py):
    def run(self) -> None:
        super().run()
        for relative in BUNDLED_DIRS:
            source = Path(relative)
            if not source.is_dir():
                raise FileNotFoundError(f"{relative} is missing from the source tree (MANIFEST.in grafts it)")
            target = Path(self.build_lib) / "josh" / "_bundled" / relative
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithBundledData})
