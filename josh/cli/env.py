"""``josh env``: josh's environments for other trainers; ``josh env serve NAME`` runs one as an OpenEnv server
(``josh.run.openenv_server``; the ``josh-agents[openenv]`` extra)."""

from __future__ import annotations

import typer

from josh.cli.options import key_values
from josh.util.errors import reports_errors

env_app = typer.Typer(help="josh's environments for other trainers (OpenEnv).", no_args_is_help=True)

INSTALL_HINT = "josh env serve needs OpenEnv: pip install 'josh-agents[openenv]'"


@env_app.command("serve")
@reports_errors
def serve(
    name: str = typer.Argument(..., help="the environment: toolwoz, retail, airline, tau2-airline, ..."),
    data: str = typer.Option("mini", "--data", help="its data source (toolwoz: 'mini', 'toolwoz' or a folder)"),
    env_option: list[str] | None = typer.Option(None, "--env-option", help="KEY=VALUE environment option"),
    user: str | None = typer.Option(
        None, "--user", help="the user simulator inside the environment (default: the rule-based one made for it)"
    ),
    user_option: list[str] | None = typer.Option(None, "--user-option", help="KEY=VALUE user option"),
    user_backend: str = typer.Option("hf", "--user-backend", help="an LLM user's backend"),
    user_model: str | None = typer.Option(None, "--user-model", help="an LLM user's model (e.g. smollm2)"),
    user_base_url: str | None = typer.Option(None, "--user-base-url", help="an openai user backend's URL"),
    max_turns: int = typer.Option(15, min=1, help="most agent messages per episode"),
    max_sessions: int = typer.Option(16, min=1, help="episodes served at the same time (one per WebSocket)"),
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8000, "--port", help="port to listen on"),
) -> None:
    """Serve environment NAME with its user simulator as an OpenEnv server (reset, step, state, tools over MCP)."""
    try:
        import uvicorn  # optional: the openenv extra

        from josh.run.openenv_server import (  # optional: the openenv extra
            build_served,
            serve_app,
        )
    except ImportError as exc:
        raise ImportError(f"{INSTALL_HINT} ({exc})") from None

    served = build_served(
        name, data, env_options=key_values(env_option, "--env-option", "judge=hf:smollm2"), user_kind=user,
        user_options=key_values(user_option, "--user-option", "seed=1"),
        user_llm=(user_backend, user_model, user_base_url) if user_model else None,
        max_turns=max_turns,
    )  # fmt: skip
    app = serve_app(served, max_sessions=max_sessions)
    typer.echo(f"serving {name} as an OpenEnv environment on http://{host}:{port} (Ctrl-C stops)")
    uvicorn.run(app, host=host, port=port, log_level="warning")
