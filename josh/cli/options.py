"""The run options of ``josh eval`` and ``josh rollout``, written once: generated from the ``RunSpec`` fields (their
descriptions are the help, the registries add the valid names and options) plus a stage's task limit and sampling.

``@run_options(split)`` puts them and ``--split`` (default ``split``) in a command's signature where it has a ``spec``
parameter and hands the command one checked ``ComponentOptions``; a bad value is one red line before the command runs.
``RunCommand`` fills in the registries' names and options when help is shown, so other commands never import every
agent and user module. ``@prints_json`` gives a command whose summary is a table ``--json``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import sys
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import typer
from pydantic import BaseModel
from typer.core import TyperCommand

from josh.core.llm import Sampling
from josh.llm.factory import BACKENDS
from josh.run.spec import RunSpec
from josh.util.errors import reported

if TYPE_CHECKING:
    from josh.registry import Registry
    from josh.run.components import ComponentOptions

NAMED = {"env": "env", "agent": "agent", "backend": "backend", "user": "user", "user_backend": "backend"}
OPTIONS = {"env_options": "env", "agent_options": "agent", "llm_options": "backend", "user_options": "user"}
EXAMPLES = {
    "env_options": "judge=openai:gpt-4.1",
    "agent_options": "examples=2",
    "llm_options": "dtype=bfloat16",
    "user_options": "patience=5",
}


def registry(kind: str) -> Registry:
    """The registry of environments, agents, users or backends."""
    from josh.agents import AGENTS  # heavy: the component registries, which josh --help does not read
    from josh.envs import ENVIRONMENTS  # heavy: as above
    from josh.users import USERS  # heavy: as above

    return {"env": ENVIRONMENTS, "agent": AGENTS, "backend": BACKENDS, "user": USERS}[kind]


def _option_text(name: str) -> str:
    """The help of a ``KEY=VALUE`` run option (without the entries' options)."""
    return f"{RunSpec.model_fields[name].description}, KEY=VALUE, repeatable (e.g. {EXAMPLES[name]})"


def remote_options() -> list[str]:
    """The options of an OpenEnv server as an environment (``--env openenv:URL``)."""
    from josh.envs.openenv import RemoteEnv  # heavy: the OpenEnv client's modules

    return list(inspect.signature(RemoteEnv).parameters)[1:]


def registry_help(name: str) -> str:
    """The full help of a run option that names registry entries or their options."""
    if name in OPTIONS:
        remote = f"; openenv:URL: {', '.join(remote_options())}" if OPTIONS[name] == "env" else ""
        return f"{_option_text(name)}; {registry(OPTIONS[name]).options_help()}{remote}"
    entries = registry(NAMED[name])
    names = ", ".join(entries.names()) if NAMED[name] == "backend" else entries.describe()
    if name == "env":
        names += "; or openenv:URL, an OpenEnv server"
    return f"{RunSpec.model_fields[name].description}: {names}"


class RunCommand(TyperCommand):
    """A command with run options; see the module docstring."""

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        for param in self.params:
            if param.name in NAMED or param.name in OPTIONS:
                param.help = registry_help(param.name)
        super().format_help(ctx, formatter)


def _spec_option(name: str) -> tuple[Any, Any]:
    """(annotation, typer option) of one ``RunSpec`` field: a name, a value, or repeatable ``KEY=VALUE`` options."""
    field = RunSpec.model_fields[name]
    if name in OPTIONS:
        flag = "--" + name.removesuffix("s").replace("_", "-")
        return list[str] | None, typer.Option(None, flag, help=_option_text(name))
    return field.annotation, typer.Option(field.get_default(call_default_factory=True), help=field.description)


RUN_OPTIONS: dict[str, tuple[Any, Any]] = {
    **{name: _spec_option(name) for name in RunSpec.model_fields},
    "temperature": (
        float | None,
        typer.Option(None, min=0.0, help="agent sampling temperature (default: the agent's)"),
    ),
    "max_new_tokens": (
        int | None,
        typer.Option(None, min=1, help="agent max new tokens per generation (default: the agent's)"),
    ),
    "limit": (int | None, typer.Option(None, min=1, help="only the first N tasks of the split")),
}


def split_option(default: str) -> Any:
    """The ``--split`` option of a command that runs on one task split (``default``: the one it usually runs on)."""
    return typer.Option(default, help="task split")


PROGRESS: Any = typer.Option(True, help="show progress bars")
MAX_TURNS: Any = typer.Option(15, min=1, help="most agent turns per conversation")


def option(name: str) -> Any:
    """The typer option of one run option, for a command that takes it alone (e.g. ``josh matrix``)."""
    return RUN_OPTIONS[name][1]


def key_values(texts: list[str] | None, flag: str, example: str) -> dict[str, Any]:
    """``KEY=VALUE`` flags as a dict (values read as YAML)."""
    from josh.training.recipe import parse_override  # heavy: the training stage

    out = {}
    for text in texts or []:
        path, value = parse_override(text, flag, example)
        if len(path) != 1:
            raise ValueError(f"bad {flag} {text!r}: expected KEY=VALUE with a plain key, e.g. {example}")
        out[path[0]] = value
    return out


def components_from(values: dict[str, Any], split: str = "test") -> ComponentOptions:
    """``ComponentOptions`` from run option values; temperature / max_new_tokens become the agent's sampling."""
    from josh.run.components import ComponentOptions  # heavy: the run layer

    values = dict(values)
    temperature, max_new = values.pop("temperature", None), values.pop("max_new_tokens", None)
    for name, example in EXAMPLES.items():
        flag = RUN_OPTIONS[name][1].param_decls[0]
        values[name] = key_values(values.get(name), flag, example)
    sampling = None
    if temperature is not None or max_new is not None:
        defaults = Sampling()
        sampling = Sampling(
            temperature=defaults.temperature if temperature is None else temperature,
            max_new_tokens=defaults.max_new_tokens if max_new is None else max_new,
        )
    return ComponentOptions(**values, split=split, agent_sampling=sampling)


def run_options(split: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Replace a command's ``spec`` parameter by ``--split`` (default ``split``: the split the command usually runs
    on) and the run options; the command receives them as one ``ComponentOptions`` in ``spec``."""
    options = {"split": (str, split_option(split)), **RUN_OPTIONS}

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command)
        params = list(signature.parameters.values())
        at = [p.name for p in params].index("spec")
        shared = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
            for name, (annotation, default) in options.items()
        ]
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=_resolved(p.annotation, command))
            for p in params[:at] + params[at + 1 :]
        ]

        @functools.wraps(command)
        def wrapper(**values: Any) -> Any:
            chosen = {name: values.pop(name) for name in RUN_OPTIONS}
            with reported():
                spec = components_from(chosen, values.pop("split"))
            return command(spec=spec, **values)

        wrapper.__signature__ = signature.replace(parameters=own[:at] + shared + own[at:])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in own + shared}
        return wrapper

    return decorate


def _resolved(annotation: Any, command: Callable[..., Any]) -> Any:
    """A parameter's annotation as a type (a postponed one is evaluated in the command's module)."""
    return eval(annotation, command.__globals__) if isinstance(annotation, str) else annotation  # noqa: S307


JSON_HELP = "print the summary as JSON on stdout (the same figures; every other line goes to stderr)"
_summary: ContextVar[list[Any] | None] = ContextVar("josh_json_summary", default=None)


def prints_json(command: Callable[..., Any]) -> Callable[..., Any]:
    """A command decorator: adds ``--json``, under which what the command prints goes to standard error and the
    summary it hands ``json_summary`` is printed as JSON on standard output at the end (also when it exits 1 on an
    incomplete run), so a script or a job's log gets one parseable document."""
    option = inspect.Parameter(
        "as_json",
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(False, "--json", help=JSON_HELP),
        annotation=bool,
    )

    @functools.wraps(command)
    def wrapper(*args: Any, as_json: bool = False, **kwargs: Any) -> Any:
        if not as_json:
            return command(*args, **kwargs)
        summaries: list[Any] = []
        token = _summary.set(summaries)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                return command(*args, **kwargs)
        finally:
            _summary.reset(token)
            if summaries:
                value = summaries[-1]
                text = value.model_dump_json(indent=2) if isinstance(value, BaseModel) else json.dumps(value, indent=2)
                typer.echo(text)

    signature = inspect.signature(command)
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), option])  # type: ignore[attr-defined]
    return wrapper


def json_summary(value: BaseModel | dict[str, Any]) -> None:
    """The summary a ``prints_json`` command prints with ``--json`` (nothing without it)."""
    summaries = _summary.get()
    if summaries is not None:
        summaries.append(value)
