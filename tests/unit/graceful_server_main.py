"""``python -m tests.unit.graceful_server_main PORT``: a ``GracefulServer`` serving "ok" on
loopback, as ``ragblend serve`` runs it, for tests that stop it with a real signal."""

from __future__ import annotations

import sys
from typing import Any

import uvicorn

from gateway.http.shutdown import GracefulServer, Shutdown


async def plain_text_app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    headers = [(b"content-type", b"text/plain")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


if __name__ == "__main__":
    config = uvicorn.Config(
        plain_text_app, host="127.0.0.1", port=int(sys.argv[1]), lifespan="off", log_level="info"
    )
    GracefulServer(config, Shutdown(timeout_s=1.0)).run()
