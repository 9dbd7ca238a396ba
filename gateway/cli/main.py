"""The ``ragblend`` command: ``serve``, ``models``, ``ingest``, ``query`` and ``selfcheck``."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from gateway.settings import Settings

if TYPE_CHECKING:
    import uvicorn


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragblend", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the OpenAI-compatible API")
    serve.add_argument("--model", help="model name or Hugging Face directory (RAGBLEND_MODEL)")
    serve.add_argument("--host", help="bind address (RAGBLEND_HOST)")
    serve.add_argument("--port", type=int, help="bind port (RAGBLEND_PORT)")

    listing = commands.add_parser("models", help="list or provision models")
    listing.add_argument("--provision", metavar="NAME", nargs="+", help="install and convert")

    check = commands.add_parser("selfcheck", help="compare blend with full prefill on a server")
    check.add_argument("--prompts", type=int, default=6, help="prompts per mode")
    ingest = commands.add_parser("ingest", help="upload files or folders to a running server")
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    query = commands.add_parser("query", help="ask a running server, with retrieval")
    query.add_argument("question")
    query.add_argument("--top-k", type=int, help="chunks to retrieve (default: the server's)")
    query.add_argument(
        "--mode", choices=["blend", "full", "reuse"], help="blend mode (default: the server's)"
    )
    for client_command in (check, ingest, query):
        client_command.add_argument("--url", help="server URL (default: RAGBLEND_HOST:PORT)")
        client_command.add_argument(
            "--api-key", help="bearer key (default: first of RAGBLEND_API_KEYS)"
        )

    args = parser.parse_args(argv)
    overrides = {
        key: value
        for key in ("model", "host", "port")
        if (value := getattr(args, key, None)) is not None
    }
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        print(f"error: {settings_problems(exc)}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.command == "serve":
        return _serve(settings)
    if args.command == "models":
        return _models(settings, args.provision or [])
    from gateway.cli import client_commands, ingest_files

    url = args.url or f"http://{settings.host}:{settings.port}"
    api_key = args.api_key or next(iter(settings.key_callers), None)
    if args.command == "selfcheck":
        from gateway.cli import selfcheck

        return selfcheck.main(url, api_key, args.prompts)
    if args.command == "ingest":
        return ingest_files.ingest(url, api_key, args.paths)
    return client_commands.query(url, api_key, args.question, args.top_k, args.mode)


def settings_problems(error: ValidationError) -> str:
    """Each invalid setting as ``RAGBLEND_NAME: why`` (a problem of several settings: why)."""
    problems = []
    for problem in error.errors():
        reason = problem["msg"].removeprefix("Value error, ")
        names = [str(part) for part in problem["loc"]]
        problems.append(f"RAGBLEND_{names[0].upper()}: {reason}" if names else reason)
    return "invalid settings: " + "; ".join(problems)


def server_config(app: Any, settings: Settings) -> uvicorn.Config:
    """uvicorn's configuration of the ``app`` under ``settings``."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        timeout_keep_alive=settings.keep_alive_s,
    )


def _serve(settings: Settings) -> int:
    from gateway.http.startup_heap import pause_collection

    pause_collection()  # until loading ends (`gateway.loading.load`)
    from gateway.app import create_app
    from gateway.http.data_dir_lock import DataDirInUse, DataDirLock
    from gateway.http.shutdown import GracefulServer

    lock = DataDirLock(settings.data_dir)
    try:
        lock.acquire(settings.port)
    except DataDirInUse as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    with lock:
        try:
            app = create_app(settings, exit_on_load_failure=True)
        except (OSError, ValueError) as exc:  # the API key file is unreadable or malformed
            print(f"error: {exc}", file=sys.stderr)
            return 1
        GracefulServer(server_config(app, settings), app.state.ragblend.shutdown).run()
    state = app.state.ragblend
    return 1 if state.load_error or state.engine_died else 0


def _models(settings: Settings, to_provision: list[str]) -> int:
    from engine.model_records import record_model_class
    from engine.models.catalog import CATALOG
    from engine.models.provision import ModelNotFound, converted_dir, is_provisioned, provision

    for name in to_provision:
        if name not in CATALOG:
            print(f"unknown model {name!r}; known: {', '.join(CATALOG)}", file=sys.stderr)
            return 2
        if not is_provisioned(settings.models_dir, name):
            try:
                provision(CATALOG[name], settings.models_dir)
            except (ModelNotFound, RuntimeError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            print("  vLLM inspects the model's class once (about 20 s)", file=sys.stderr)
            record_model_class(converted_dir(settings.models_dir, name), settings.models_dir)
    for name, model in CATALOG.items():
        ready = is_provisioned(settings.models_dir, name)
        where = str(converted_dir(settings.models_dir, name)) if ready else "not provisioned"
        default = " (default)" if name == Settings.model_fields["model"].default else ""
        print(f"{name:32} {model.description}{default}\n{'':32} {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
