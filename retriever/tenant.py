"""Who a library call is for: the tenant the gateway resolved once, at authentication.

A `Tenant` carries the project whose documents, files, vector stores and responses a call may
see and change, and the salt its cached KV is keyed with. The gateway builds it (the one place
the salt is derived from the project: `gateway.http.projects.resolve_tenant`); the retriever
takes it as a required argument of every call scoped to a project and reads only its
`project`, so no call below the gateway falls back to a project of its own choosing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tenant:
    """A request's project and the salt of its chunk KV and prefix-cache entries."""

    project: str
    kv_salt: str
    """Empty for the projects that share cached KV; otherwise the project's name."""
