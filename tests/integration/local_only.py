"""Keeps the client-compatibility tests on this machine: the client packages' tracing and
telemetry are switched off by their own settings, and any connection (or name lookup) to a host
other than this one is refused and recorded, so a test fails if a package tried to phone out."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

# LangSmith reads LANGSMITH_* or LANGCHAIN_*; the Agents SDK's exporter would post to OpenAI.
# LlamaIndex and instructor send no telemetry; LlamaIndex's tiktoken would download encodings.
QUIET_ENV = {
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
}
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


def _host(address: Any) -> str | None:
    """The host of a socket address; None for a Unix socket path."""
    if isinstance(address, tuple) and address:
        return str(address[0])
    return None


@contextmanager
def local_network_only() -> Iterator[list[str]]:
    """Within the block, outside connections raise ``OSError``; yields the refused hosts."""
    refused: list[str] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(host: str | None) -> None:
        if host is not None and host not in LOCAL_HOSTS:
            refused.append(host)
            raise OSError(f"client tests stay on this machine: {host} refused")

    def connect(self: socket.socket, address: Any) -> None:
        check(_host(address))
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(_host(address))
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        check(None if host is None else (host.decode() if isinstance(host, bytes) else host))
        return real_getaddrinfo(host, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        for name, value in QUIET_ENV.items():
            patch.setenv(name, value)
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        patch.setattr(socket, "getaddrinfo", getaddrinfo)
        yield refused
