"""A request that needs the shared library while its database is down gets a 503 in OpenAI's
error shape, and the same request succeeds as soon as the database is back."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI
from fastapi.testclient import TestClient

from gateway.http.errors import install_error_handlers
from retriever import EVERY_PROJECT
from retriever.db.postgres import PgDatabase
from retriever.library.document_store import DocumentStore
from tests.unit import pg_library_parts

postgres = pg_library_parts.postgres
database_url = pg_library_parts.database_url


def test_an_outage_is_a_503_until_the_database_is_back(database_url, postgres):
    store = DocumentStore(PgDatabase(database_url))
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/documents")
    async def documents() -> dict[str, int]:
        return {"total": (await asyncio.to_thread(store.list_documents, project=EVERY_PROJECT))[1]}

    try:
        with TestClient(app) as client:
            assert client.get("/documents").json() == {"total": 0}
            postgres.stop()
            response = client.get("/documents")
            postgres.start()
            assert client.get("/documents").json() == {"total": 0}
    finally:
        store.close()
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["message"].startswith("document library unavailable: ")
    assert (error["type"], error["code"], error["param"]) == (
        "service_unavailable_error",
        "library_unavailable",
        None,
    )
