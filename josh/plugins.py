"""Components other packages register through entry points, loaded the first time a name is looked up.

A package adds an environment, an agent, a user simulator, a backend or a loop arm with one line of its own
``pyproject.toml``, in the group of that kind (``GROUPS``), named as the component and pointing at a registration
function (called with no arguments; it calls ``register_env`` and the like) or at the entry itself::

    [project.entry-points."josh.environments"]
    echo = "josh_echo_env:register"

A plugin that fails to load (its import raises, its function raises, or it registers nothing under its name) is
reported once by name with its error, in one line; asking for that name raises ``PluginError`` with the same line,
and every other name still works.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container
from importlib.metadata import EntryPoint, entry_points
from typing import Any

GROUPS = {
    "environment": "josh.environments",
    "agent": "josh.agents",
    "user": "josh.users",
    "backend": "josh.backends",
    "arm": "josh.arms",
}
LOG = logging.getLogger("josh.plugins")


class PluginError(ValueError):
    """A plugin named by the user failed to load; the message names it, its package and its error."""


class Plugins:
    """The entry points of one ``group``: those found and not loaded yet, and those that failed to load."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.pending: dict[str, EntryPoint] = {}
        self.broken: dict[str, str] = {}

    def scan(self, known: Container[str]) -> None:
        """Note the group's entry points that are neither ``known`` nor tried (a package installed later is found)."""
        for point in entry_points(group=self.group):
            name = point.name.strip().lower()
            if name not in known and name not in self.broken:
                self.pending.setdefault(name, point)

    def load(self, name: str, accept: Callable[[Any], None], registered: Callable[[str], bool]) -> None:
        """Load the pending plugin ``name``: call its registration function, or ``accept`` the entry it points at;
        a failure is noted in ``broken`` and logged in one line."""
        point = self.pending.pop(name)
        try:
            loaded = point.load()
            loaded() if callable(loaded) else accept(loaded)
            if not registered(name):
                raise LookupError(f"it registered no {self.group} entry named {name!r}")
        except Exception as exc:  # any plugin bug is reported by name; it never breaks the other names
            dist = f" from {point.dist.name} {point.dist.version}" if point.dist else ""
            self.broken[name] = (
                f"plugin {name!r} ({self.group} = {point.value}{dist}) failed to load: {type(exc).__name__}: {exc}"
            )
            LOG.warning(self.broken[name])

    def load_all(self, accept: Callable[[Any], None], registered: Callable[[str], bool]) -> None:
        for name in list(self.pending):
            self.load(name, accept, registered)

    def check(self, name: str) -> None:
        """Raise ``PluginError`` when ``name`` is a plugin that failed to load."""
        if name in self.broken:
            raise PluginError(self.broken[name])
