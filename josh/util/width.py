"""How wide josh prints when its standard output is not a terminal (a pipe, a cluster job's log file).

rich lays out for 80 columns there, which cut every table and ``--help`` panel to 80 (``┃ sp… ┃ ta… ┃``). A log
reader wants each table whole on its own lines, so josh sets ``COLUMNS`` (which rich and typer read) to
``LOG_COLUMNS`` instead, unless it is set already; a table takes only the width it needs.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

LOG_COLUMNS = 200


def wide_when_not_a_terminal(stream: TextIO | None = None) -> None:
    """Set ``COLUMNS`` to ``LOG_COLUMNS`` when ``stream`` (default: standard output) is not a terminal and
    ``COLUMNS`` is unset, so that tables print whole; processes started later inherit it."""
    if "COLUMNS" in os.environ:
        return
    stream = stream or sys.stdout
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        terminal = False
    if not terminal:
        os.environ["COLUMNS"] = str(LOG_COLUMNS)
