"""Temporary changes to another library, for the one call that needs them, undone when it returns.

josh changes another library's internals only where it must, and only inside a ``with`` block around the call that
needs the change: ``replaced`` swaps a module attribute and puts the original back, ``env_default`` sets an
environment variable the user has not set and removes it again. Each such change was written against one range of
the library's versions: ``installed_within`` says whether the installed version is in it, so that outside the range
the library runs as it is.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

log = logging.getLogger("josh")


def installed_version(*distributions: str) -> Version | None:
    """The installed version of the first of ``distributions`` found (a library may ship under several names)."""
    for name in distributions:
        try:
            return Version(metadata.version(name))
        except (metadata.PackageNotFoundError, InvalidVersion):
            continue
    return None


def installed_within(specifier: str, *distributions: str, change: str, otherwise: str) -> bool:
    """Whether the installed version of ``distributions`` satisfies ``specifier`` (pre-releases included); when it
    does not, log that ``change`` is not made and what happens instead (``otherwise``)."""
    version = installed_version(*distributions)
    if version is not None and SpecifierSet(specifier).contains(version, prereleases=True):
        return True
    found = f"{distributions[0]} {version}" if version else f"no {distributions[0]}"
    log.warning("%s not made: written for %s %s, found %s; %s", change, distributions[0], specifier, found, otherwise)
    return False


@contextmanager
def replaced(owner: Any, name: str, value: Any) -> Iterator[Any]:
    """``owner.name`` is ``value`` inside the block and the original again after it, however the block ends.
    Yields the original."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield original
    finally:
        setattr(owner, name, original)


@contextmanager
def env_default(name: str, value: str) -> Iterator[None]:
    """The environment variable ``name`` is ``value`` inside the block unless the user set it; unset again after."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)
