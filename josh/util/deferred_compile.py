"""bitsandbytes' CPU ops wrapped by ``torch.compile`` when they are first called, not when bitsandbytes is imported.

bitsandbytes (0.50) wraps the default (CPU) implementations of its ops in ``torch.compile`` at import time, and
PEFT imports bitsandbytes whenever it is installed, so every process that trains or loads an adapter imported
torch's inductor for it: about 1 s of a 10 s one-step ``josh train sft`` on 2 cores, in a training run that never
quantizes. ``torch.compile`` compiles nothing when it wraps a function (it compiles at the first call), so wrapping
at the first call instead changes only when inductor is imported: the ops, and bitsandbytes' own fallback to the
uncompiled function when compilation fails, stay as they are. ``install()`` (run by ``import josh``) puts a finder
on ``sys.meta_path`` that does this for the one bitsandbytes module concerned and nothing else.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

MODULES = ("bitsandbytes.backends.default.ops",)  # the modules whose torch.compile calls are deferred


def deferred(compile_now: Callable[..., Any]) -> Callable[..., Any]:
    """A ``torch.compile`` that returns a function calling ``compile_now(fn, **options)`` on its first call."""

    def compile_later(model: Any = None, **options: Any) -> Any:
        if model is None:  # used as @torch.compile(dynamic=False)
            return lambda fn: compile_later(fn, **options)
        compiled = None

        @functools.wraps(model)
        def call(*args: Any, **kwargs: Any) -> Any:
            nonlocal compiled
            if compiled is None:
                compiled = compile_now(model, **options)
            return compiled(*args, **kwargs)

        return call

    return compile_later


class _DeferringLoader(importlib.abc.Loader):
    """Executes a module with ``torch.compile`` deferred; everything else goes to the module's own loader."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        import torch

        compile_now = torch.compile
        torch.compile = deferred(compile_now)
        try:
            self.loader.exec_module(module)
        finally:
            torch.compile = compile_now

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... (inspect, tracebacks)
        return getattr(self.loader, name)


class DeferredCompileFinder(importlib.abc.MetaPathFinder):
    """Finds the ``MODULES`` as the path finder does and hands them to a ``_DeferringLoader``."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _DeferringLoader(spec.loader)
        return spec


def install() -> None:
    """Put the finder on ``sys.meta_path`` ahead of the path finder that would otherwise find the module (once per
    process; finders other libraries insert first later do not claim bitsandbytes' modules)."""
    if not any(isinstance(finder, DeferredCompileFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, DeferredCompileFinder())
