"""Tenants for the tests, resolved as the gateway resolves a request's project: by
`gateway.http.projects.resolve_tenant`, with the server's default projects sharing KV."""

from __future__ import annotations

from gateway.http.projects import resolve_tenant
from retriever import DEFAULT_PROJECT, Tenant

SHARED_KV_PROJECTS = (DEFAULT_PROJECT,)
"""`Settings.shared_kv_projects` as a server starts without it set."""


def tenant(project: str = DEFAULT_PROJECT) -> Tenant:
    """`project`'s tenant on a server with the default settings."""
    return resolve_tenant(project, SHARED_KV_PROJECTS)


DEFAULT = tenant()
"""The tenant of every request without a project (authentication off, or a bare key)."""
