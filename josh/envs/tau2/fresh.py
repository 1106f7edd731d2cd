"""Fresh τ² environments for τ²'s own evaluator, without reloading the domain's database each time.

τ²'s ``evaluate_simulation`` builds two fresh environments per scored conversation (the predicted replay and the
gold one) with the domain's registered constructor, which reads and validates the whole database: about 0.3 s for
airline and retail, over two thirds of scoring one conversation. ``evaluation_domain(domain)`` registers, once per
process, a second constructor under a private name in τ²'s registry that builds each environment over one pristine
load instead: on airline and retail (tabular databases, ``josh.envs.tau2.state``) a copy-on-write ``branch``: a
tool call that is not a ``READ`` tool, and any environment function (initialisation actions, assertions), runs with
the tables copying every record it reaches, so the pristine records are never changed, while reads scan them in
place as the search's branches do; on any other domain a deep copy of the pristine environment.

The evaluator then compares the two databases by τ²'s hash, the SHA-256 of ``json.dumps(db.model_dump(),
sort_keys=True, default=str)`` (about 0.1 s each on airline). On a tabular database ``db_hash`` hashes the same
string assembled per record, each pristine record's JSON serialised once per process, so only the records a
conversation changed are serialised again. Same data, same tools, same hashes: τ²'s evaluator runs unchanged on
it (tests compare the hashes with τ²'s and the rewards with τ²'s evaluator on perturbed trajectories).
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from importlib import import_module
from typing import Any

from pydantic import BaseModel
from tau2.environment.toolkit import ToolType

from josh.envs.tau2.state import branch, tabular, writing

_LOCK = threading.Lock()
_PRISTINE: dict[str, Any] = {}
_JSON: dict[int, tuple[Any, str]] = {}  # id of a pristine record -> (the record, its entry as τ²'s hash writes it)


def _row(key: str, record: Any, pristine: bool) -> str:
    """One ``"key": {record}`` entry of a table as τ²'s hash serialises it; a pristine record's is made once."""
    if not pristine:
        return f"{json.dumps(key)}: {json.dumps(record.model_dump(), sort_keys=True, default=str)}"
    cached = _JSON.get(id(record))
    if cached is None or cached[0] is not record:
        cached = _JSON[id(record)] = (record, _row(key, record, False))
    return cached[1]


def _key(item: tuple[str, Any]) -> str:
    return item[0]


def db_hash(db: Any, pristine_db: Any) -> str:
    """τ²'s ``get_dict_hash(db.model_dump())`` for a database of tables keyed by strings; records shared with
    ``pristine_db`` (never changed, see the module docstring) reuse their serialised JSON."""
    tables = []
    for name in sorted(type(db).model_fields):
        table, shared = getattr(db, name), getattr(pristine_db, name)
        rows = ", ".join(
            _row(key, record, shared.get(key) is record) for key, record in sorted(dict.items(table), key=_key)
        )
        tables.append(f"{json.dumps(name)}: {{{rows}}}")
    return hashlib.sha256(f"{{{', '.join(tables)}}}".encode()).hexdigest()


def _hashable(db: Any) -> bool:
    """Whether ``db_hash`` reproduces τ²'s hash: every field a table of pydantic records keyed by strings."""
    return all(
        isinstance(table := getattr(db, name), dict)
        and all(isinstance(key, str) and isinstance(record, BaseModel) for key, record in dict.items(table))
        for name in type(db).model_fields
    )


def pristine(domain: str) -> Any:
    """The process's one load of ``domain``'s environment (τ²'s ``get_environment()``), never changed: the
    evaluator's fresh environments and every ``Tau2Env``'s tasks start from it."""
    with _LOCK:
        if domain not in _PRISTINE:
            _PRISTINE[domain] = import_module(f"tau2.domains.{domain}.environment").get_environment()
        return _PRISTINE[domain]


def fresh_environment(domain: str, solo_mode: bool = False) -> Any:
    """An environment equal to ``get_environment(solo_mode=solo_mode)`` that shares nothing it may change."""
    if solo_mode:  # τ²'s constructors reject or build differently in solo mode; josh never scores solo runs
        return import_module(f"tau2.domains.{domain}.environment").get_environment(solo_mode=True)
    loaded = pristine(domain)
    if not tabular(loaded):
        return copy.deepcopy(loaded)
    environment = branch(loaded)
    tools, use_tool, run_function = environment.tools, environment.tools.use_tool, environment.run_env_function_call

    def guarded_use_tool(tool_name: str, **kwargs: Any) -> Any:
        if tool_name in tools.tools and tools.tool_type(tool_name) == ToolType.READ:
            return use_tool(tool_name, **kwargs)
        with writing(environment):
            return use_tool(tool_name, **kwargs)

    def guarded_function(call: Any) -> Any:
        with writing(environment):
            return run_function(call)

    def hash_db() -> str:
        return db_hash(tools.db, loaded.tools.db) if _hashable(tools.db) else tools.__class__.get_db_hash(tools)

    tools.use_tool = guarded_use_tool
    tools.get_db_hash = hash_db
    environment.run_env_function_call = guarded_function
    return environment


def evaluation_domain(domain: str) -> str:
    """The name under which τ²'s registry builds ``domain``'s environments with ``fresh_environment``."""
    from tau2.registry import registry  # optional: the tau2 extra

    name = f"josh-fresh-{domain}"
    with _LOCK:
        if name not in registry.get_domains():
            registry.register_domain(lambda solo_mode=False: fresh_environment(domain, solo_mode), name)
    return name
