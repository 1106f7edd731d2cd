"""The retail tool registry: the tools of ``writes`` change the database, those of ``lookups`` (and the shared
τ-bench ones) only read it; the wrapper and its argument check are ``josh.envs.taubench.tools``."""

from __future__ import annotations

from josh.envs.retail.tools import lookups, writes
from josh.envs.retail.tools.schemas import SCHEMAS
from josh.envs.taubench.tools import Tool, make_registry

TOOLS: dict[str, Tool] = make_registry(SCHEMAS, lookups, writes)
WRITE_TOOLS = tuple(name for name, tool in TOOLS.items() if tool.writes)
