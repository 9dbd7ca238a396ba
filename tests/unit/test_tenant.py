"""The tenant: resolved once a request, where its project's KV salt is derived, and required by
every retriever call scoped to a project (one made without it fails at the call)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from starlette.requests import Request

from gateway.callers import Caller
from gateway.http.limits import CALLER
from gateway.http.projects import resolve_tenant
from gateway.settings import Settings
from gateway.state import TENANT, AppState, request_tenant
from retriever import DEFAULT_PROJECT, Library, NewDocument, RagObjects, Tenant
from retriever.library.facade import STORE_FILE
from retriever.objects.file_store import FileStore
from retriever.objects.response_store import ResponseStore
from retriever.objects.vector_store_db import VectorStoreDB
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder
from tests.unit.tenants import DEFAULT, tenant

SCOPED = ("ingest", "search", "get", "list", "delete")
"""The library's calls that read or change one project's documents."""


@pytest.fixture
def library(tmp_path: Path) -> Iterator[Library]:
    opened = Library(tmp_path / "library", CharTokenizer(), WordEmbedder(), chunk_tokens=400)
    opened.ingest([NewDocument("pump", "The sea pump shows fault F-2291.")], tenant=DEFAULT)
    yield opened
    opened.close()


@pytest.mark.parametrize("name", SCOPED)
def test_every_scoped_library_call_requires_the_tenant_by_keyword(name: str) -> None:
    parameter = inspect.signature(getattr(Library, name)).parameters["tenant"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is inspect.Parameter.empty


def test_a_library_call_without_the_tenant_fails_at_the_call(library: Library) -> None:
    calls = {
        "ingest": lambda: library.ingest([NewDocument("x", "Other text.")]),
        "search": lambda: library.search("fault F-2291", 2),
        "get": lambda: library.get("pump"),
        "list": lambda: library.list(),
        "delete": lambda: library.delete("pump"),
    }
    assert sorted(calls) == sorted(SCOPED)
    for name, call in calls.items():
        with pytest.raises(TypeError, match="tenant"):
            call()
        assert library.get("pump", tenant=DEFAULT) is not None, name  # nothing was done
    with pytest.raises(TypeError):
        library.search("fault F-2291", 2, None, None, DEFAULT)  # type: ignore[misc]
    assert library.list(tenant=DEFAULT)[1] == 1


def test_a_project_name_is_no_tenant(library: Library) -> None:
    """A bare project name where the tenant goes fails loudly, rather than picking a project."""
    with pytest.raises(AttributeError):
        library.get("pump", tenant=DEFAULT_PROJECT)  # type: ignore[arg-type]


def test_the_objects_are_no_projects_until_given_a_tenant(tmp_path: Path) -> None:
    path = tmp_path / STORE_FILE
    objects = RagObjects(path)
    try:
        for stores in ("files", "vector_stores", "responses", "tenant"):
            with pytest.raises(AttributeError):
                getattr(objects, stores)
        alpha = objects.in_project(tenant("alpha"))
        assert (alpha.project, alpha.tenant) == ("alpha", tenant("alpha"))
        assert (alpha.files.project, alpha.responses.project) == ("alpha", "alpha")
        for store in (FileStore, VectorStoreDB, ResponseStore):
            with pytest.raises(TypeError):
                store(objects.database)  # type: ignore[call-arg]
    finally:
        objects.close()


def test_the_salt_is_derived_from_the_project_in_one_place() -> None:
    """As before the tenant: the projects sharing KV (``default`` unless set) are unsalted, every
    other project is salted with its name; the app resolves with its settings."""
    shared = Settings(model="m").shared_kv_projects
    assert resolve_tenant(DEFAULT_PROJECT, shared) == Tenant(DEFAULT_PROJECT, "")
    assert resolve_tenant("alpha", shared) == Tenant("alpha", "alpha")
    assert resolve_tenant(DEFAULT_PROJECT, ["docs"]) == Tenant(DEFAULT_PROJECT, DEFAULT_PROJECT)
    assert resolve_tenant("docs", ["docs"]).kv_salt == ""
    state = AppState(Settings(model="m", shared_kv_projects="public"))
    assert state.tenant("public") == Tenant("public", "")
    assert state.tenant(DEFAULT_PROJECT) == Tenant(DEFAULT_PROJECT, DEFAULT_PROJECT)


def test_a_request_resolves_its_tenant_once_from_its_caller() -> None:
    state = AppState(Settings(model="m"))
    app = SimpleNamespace(state=SimpleNamespace(ragblend=state))
    scope = {"type": "http", "app": app, "headers": [], CALLER: Caller("alpha")}
    request = Request(scope)
    resolved = request_tenant(request)
    assert resolved == Tenant("alpha", "alpha") and scope[TENANT] is resolved
    scope[CALLER] = Caller("beta")  # read no more: the request keeps the tenant it resolved
    assert request_tenant(request) is resolved
    anonymous = Request({"type": "http", "app": app, "headers": []})
    assert request_tenant(anonymous) == Tenant(DEFAULT_PROJECT, "")  # authentication off
