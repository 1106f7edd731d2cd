"""The ``josh`` command: the app, its error reporting, generated run options, the viewer and the server."""

from typing import Any


def __getattr__(name: str) -> Any:
    """``josh.cli:app`` (the console script) without importing the app for ``josh.util.errors`` users."""
    if name == "app":
        from josh.cli.main import app  # heavy: the whole app, which josh.cli's other modules do not need

        return app
    raise AttributeError(name)
