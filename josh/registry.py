"""One shape for every extension point: environments, agents, user simulators and LLM backends are registries of
named entries.

An entry carries its builder, a pydantic model of its options, whether it needs a model (an LLM for agents and
users, a model name for backends) and the environments it supports (``None``: any). The CLI's help, and every error
for an unknown name, an unknown or bad option or an unsupported environment, are generated from the entries.

A registry may name modules that register themselves when imported (a package stands for all of its modules): they
are imported the first time a name is looked up, so a new user simulator is one file in ``josh/users/`` that calls
``register_user``. It may also name entries the way an entry point does (``module:attribute``, an ``Entry``): a
scripted agent or user that belongs to one environment is declared there with ``entry`` (``ORACLE = entry(...)`` in
``josh.envs.toolwoz.oracle``), so the environment's package never imports the agents' or users' package. A registry with a ``group`` also loads the components other packages name in that entry-point group
(``josh.plugins``), the first time a name is looked up.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from josh.plugins import Plugins
from josh.util.strict import closest, keys_at


@dataclass(frozen=True)
class Entry:
    """One registered name; see the module docstring."""

    name: str
    builder: Callable[..., Any]
    options: type[BaseModel]
    needs_model: bool = False
    envs: tuple[str, ...] | None = None
    summary: str = ""

    def supports(self, env: str) -> bool:
        return self.envs is None or env in self.envs


def entry(
    name: str,
    builder: Callable[..., Any],
    *,
    builder_args: int,
    noun: str,
    options: type[BaseModel] | None = None,
    needs_model: bool = False,
    envs: tuple[str, ...] | None = None,
    summary: str = "",
) -> Entry:
    """An entry as ``Registry.register`` makes it, for a registry that names it (``module:attribute``) or a plugin's
    entry point; ``builder_args`` and ``noun`` as the registry's (agents: 2, "agent"; users: 1, "user")."""
    model = options or options_of(builder, skip=builder_args, title=f"{name} {noun} options")
    return Entry(name, builder, model, needs_model, envs, summary)


class Registry:
    """Named entries of one kind (``kind``: how errors name it, e.g. 'agent strategy'; ``flag``: the CLI option that
    picks one; ``noun`` and ``options_flag``: how option errors name an entry and where its options come from;
    ``free_label``: how help texts call the entries that need no model; ``fixed``: option-model fields that their
    own flags set, left out of the valid options named in errors; ``builder_args``: how many positional arguments
    every builder takes before its options; ``group``: the entry-point group of other packages' entries)."""

    def __init__(
        self,
        kind: str,
        flag: str,
        *,
        noun: str | None = None,
        options_flag: str = "",
        discover: tuple[str, ...] = (),
        free_label: str = "scripted",
        fixed: tuple[str, ...] = (),
        builder_args: int = 0,
        group: str = "",
    ) -> None:
        self.kind, self.flag, self.noun, self.options_flag = kind, flag, noun or kind, options_flag
        self.free_label, self.fixed, self.builder_args = free_label, fixed, builder_args
        self._entries: dict[str, Entry] = {}
        self._aliases: dict[str, str] = {}
        self._discover_from = discover
        self._discovered = False
        self.plugins = Plugins(group) if group else None

    def register(
        self,
        name: str,
        builder: Callable[..., Any],
        *,
        options: type[BaseModel] | None = None,
        needs_model: bool = False,
        envs: tuple[str, ...] | None = None,
        summary: str = "",
        aliases: tuple[str, ...] = (),
    ) -> Entry:
        """Add (or replace) ``name``. Without ``options`` the options model is read off the builder's parameters
        after its positional ``builder_args`` (their names, types and defaults)."""
        made = entry(
            name, builder, builder_args=self.builder_args, noun=self.noun, options=options, needs_model=needs_model,
            envs=envs, summary=summary,
        )  # fmt: skip
        self._accept(made)
        self._aliases.update(dict.fromkeys(aliases, name))
        return made

    def _discover(self, *, load: bool = True) -> None:
        """Import the modules that register themselves (once all of them imported; a failure raises again on the next
        lookup) and (``load``) find and load every plugin of the group."""
        if not self._discovered:
            for name in self._discover_from:
                module_name, _, attr = name.partition(":")
                module = importlib.import_module(module_name)
                if attr:
                    self._accept(getattr(module, attr))
                    continue
                for info in pkgutil.iter_modules(getattr(module, "__path__", []), name + "."):
                    importlib.import_module(info.name)
            self._discovered = True
        if self.plugins is not None and load:
            self.plugins.scan(self._entries)  # a package installed since the first lookup
            self.plugins.load_all(self._accept, self._entries.__contains__)

    def _accept(self, entry: Any) -> None:
        """Register an ``Entry`` a plugin's entry point names."""
        if not isinstance(entry, Entry):
            raise TypeError(f"expected a registration function or a josh.registry.Entry, got {type(entry).__name__}")
        self._entries[entry.name] = entry

    def broken(self) -> dict[str, str]:
        """The plugins of the group that failed to load, each with its one-line error."""
        self._discover()
        return dict(self.plugins.broken) if self.plugins else {}

    def names(self) -> list[str]:
        """Every registered name, in registration order."""
        self._discover()
        return list(self._entries)

    def get(self, name: str) -> Entry:
        """The entry for ``name`` (case and surrounding spaces ignored, aliases resolved); ``ValueError`` naming the
        valid choices when there is none."""
        self._discover(load=False)
        key = name.strip().lower()
        key = self._aliases.get(key, key)
        if key not in self._entries and self.plugins is not None:
            self.plugins.scan(self._entries)
            if key in self.plugins.pending:  # only the plugin asked for loads here; listing loads them all
                self.plugins.load(key, self._accept, self._entries.__contains__)
            self.plugins.check(key)
        if key not in self._entries:
            names = self.names()
            near = closest(key, names)
            hint = f"did you mean {near!r}? " if near else ""
            raise ValueError(f"unknown {self.kind} {name!r} ({self.flag}); {hint}choose one of {', '.join(names)}")
        return self._entries[key]

    def describe(self) -> str:
        """The names for a help text, those that need a model apart: 'a, b (LLM) or c (scripted)'."""
        self._discover()
        needing = [n for n, e in self._entries.items() if e.needs_model]
        free = [n for n, e in self._entries.items() if not e.needs_model]
        if not needing or not free:
            return ", ".join(self._entries)
        return f"{', '.join(needing)} (LLM) or {', '.join(free)} ({self.free_label})"

    def options_help(self) -> str:
        """Each entry's options for a help text, entries with the same options together: 'a, b: x, y; c: z'."""
        self._discover()
        groups: dict[tuple[str, ...], list[str]] = {}
        for entry in self._entries.values():
            keys = tuple(k for k in entry.options.model_fields if k not in self.fixed)
            groups.setdefault(keys, []).append(entry.name)
        return "; ".join(f"{', '.join(names)}: {', '.join(keys) or 'none'}" for keys, names in groups.items())

    def check(self, name: str, *, env: str | None = None, options: Mapping[str, Any] | None = None) -> Entry:
        """The entry for ``name``, after checking that it supports ``env`` and accepts ``options``."""
        entry = self.get(name)
        if env is not None and (problem := self.unsupported(entry, env)):
            raise ValueError(f"{problem} (--env)")
        self.parse(entry, options or {})
        return entry

    def unsupported(self, entry: Entry, env: str) -> str | None:
        """Why ``entry`` cannot run on the environment ``env``; None when it can."""
        if entry.supports(env):
            return None
        return f"the {entry.name} {self.noun} runs on {', '.join(entry.envs or ())} only, not on environment {env!r}"

    def parse(self, entry: Entry, options: Mapping[str, Any]) -> BaseModel:
        """``options`` validated by the entry's options model; ``ValueError`` naming the entry, the option and the
        valid ones."""
        try:
            return entry.options.model_validate(dict(options))
        except ValidationError as exc:
            raise ValueError(self._explain(entry, exc, options)) from None

    def build(self, name: str, *args: Any, options: Mapping[str, Any] | None = None) -> Any:
        """``builder(*args, **options)`` for ``name``, the options checked first (the builder gets the given options
        only, as checked values, so its own defaults stand for the rest)."""
        entry = self.get(name)
        parsed = self.parse(entry, options or {})
        return entry.builder(*args, **{key: getattr(parsed, key) for key in options or {}})

    def _explain(self, entry: Entry, exc: ValidationError, options: Mapping[str, Any]) -> str:
        where = f" ({self.options_flag})" if self.options_flag else ""
        valid = ", ".join(k for k in entry.options.model_fields if k not in self.fixed) or "none"
        problems = []
        for error in exc.errors(include_url=False):
            key = ".".join(str(p) for p in error["loc"])
            if error["type"] == "extra_forbidden":
                owners = [e.name for e in self._entries.values() if key in e.options.model_fields]
                elsewhere = f" (an option of {', '.join(owners)})" if owners else ""
                keys = keys_at(entry.options, error["loc"]) or []
                near = closest(str(error["loc"][-1]), [k for k in keys if k not in self.fixed])
                hint = f"did you mean {'.'.join([*key.split('.')[:-1], near])!r}? " if near else ""
                problems.append(
                    f"unknown option {key}{elsewhere} for the {entry.name} {self.noun}{where}; {hint}valid: {valid}"
                )
            elif error["loc"] and error["loc"][0] in options:
                value = options[error["loc"][0]]
                problems.append(f"bad option {key}={value!r} for the {entry.name} {self.noun}{where}: {error['msg']}")
            else:
                problems.append(f"the {entry.name} {self.noun}{where}: {error['msg']}")
        return "; ".join(problems)


def options_of(builder: Callable[..., Any], *, skip: int = 0, title: str = "options") -> type[BaseModel]:
    """A strict pydantic model of ``builder``'s parameters after the first ``skip`` (a class: its ``__init__``'s,
    after ``self``); ``*args`` and ``**kwargs`` are left out."""
    function = builder.__init__ if inspect.isclass(builder) else builder
    params = list(inspect.signature(function).parameters.values())[int(inspect.isclass(builder)) + skip :]
    params = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    hints = typing.get_type_hints(function) if params else {}
    fields: dict[str, Any] = {}
    for param in params:
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, title=title)
    return create_model(title.title().replace(" ", ""), __config__=config, **fields)


def parse_backend_model(text: str, flag: str) -> tuple[str, str]:
    """``BACKEND:MODEL`` (the model may itself hold colons) as (backend, model); ``ValueError`` naming ``flag``."""
    backend, sep, model = text.partition(":")
    if not sep or not backend.strip() or not model.strip():
        raise ValueError(f"bad {flag} {text!r}: expected BACKEND:MODEL, e.g. hf:smollm2 or openai:gpt-4o")
    return backend.strip(), model.strip()
