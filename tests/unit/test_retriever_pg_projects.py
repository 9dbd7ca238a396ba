"""Projects in the shared (PostgreSQL) library, on a real server: each sees only its own
documents, chunks, files, vector stores and responses, from every replica, and names its
documents in its own id space; a database written before projects is upgraded with all of it in
`default`, and one written before ids per project with every document under the id its project
gave."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from retriever import EVERY_PROJECT
from retriever.db.pg_schema import SCHEMA_VERSION
from retriever.library.documents import NewDocument
from retriever.library.facade import Library
from retriever.objects.rag_objects import RagObjects
from tests.unit import pg_library_parts, project_scenarios
from tests.unit.gateway_fakes import CharTokenizer, WordEmbedder
from tests.unit.tenants import DEFAULT, tenant

postgres = pg_library_parts.postgres
database_url = pg_library_parts.database_url


@pytest.fixture
def replicas(
    tmp_path: Path, database_url: str
) -> Iterator[Callable[[str], tuple[Library, RagObjects]]]:
    opened: list[Library | RagObjects] = []

    def open_replica(name: str) -> tuple[Library, RagObjects]:
        library = Library(
            tmp_path / name, CharTokenizer(), WordEmbedder(), "flat", 400, database_url
        )
        objects = RagObjects(tmp_path / name / "unused.sqlite3", database_url)
        opened.extend((library, objects))
        return library, objects

    yield open_replica
    for each in reversed(opened):
        each.close()


def test_documents_stay_in_their_project(replicas):
    project_scenarios.documents_stay_in_their_project(replicas("a")[0])


def test_objects_stay_in_their_project(replicas):
    project_scenarios.objects_stay_in_their_project(*replicas("a"))


def test_stored_sizes_are_counted_per_project(replicas):
    project_scenarios.stored_sizes_are_counted_per_project(*replicas("a"))


def test_another_replica_keeps_the_projects_apart(replicas):
    first, _ = replicas("first")
    first.ingest([project_scenarios.SECRET], tenant=tenant("a"))
    second, objects = replicas("second")
    assert second.search("fault F-2291 sea pump", 3, tenant=tenant("b")) == []
    assert [hit.document_id for hit in second.search("fault F-2291", 3, tenant=tenant("a"))] == [
        "pump"
    ]
    assert objects.in_project(tenant("b")).vector_stores.searchable_files(["vs_x"]) == []


def test_a_database_written_before_projects_is_upgraded_into_default(replicas, postgres):
    old, objects = replicas("old")
    old.ingest([project_scenarios.SECRET], tenant=DEFAULT)
    objects.in_project(DEFAULT).responses.save(project_scenarios.StoredResponse("resp_1", {}, []))
    with postgres.connect() as connection:  # as schema version 3 left it
        for table in ("documents", "files", "vector_stores", "responses"):
            connection.execute(f"ALTER TABLE {table} DROP COLUMN project")
        connection.execute("ALTER TABLE chunks DROP COLUMN start_char, DROP COLUMN end_char")
        connection.execute("DELETE FROM library_schema")
        connection.execute("INSERT INTO library_schema VALUES (3)")
    upgraded, new_objects = replicas("new")
    assert upgraded.get("pump", tenant=DEFAULT).project == "default"
    assert [hit.document_id for hit in upgraded.search("fault F-2291", 2, tenant=DEFAULT)] == [
        "pump"
    ]
    assert upgraded.search("fault F-2291", 2, tenant=tenant("other")) == []
    assert new_objects.in_project(DEFAULT).responses.get("resp_1") is not None
    assert new_objects.in_project(tenant("other")).responses.get("resp_1") is None
    with postgres.connect() as connection:
        version = connection.execute("SELECT max(version) FROM library_schema").fetchone()
    assert version == (SCHEMA_VERSION,)


def test_document_ids_are_per_project(replicas):
    project_scenarios.document_ids_are_per_project(*replicas("a"))


def test_a_database_written_before_ids_per_project_keeps_every_projects_ids(replicas, postgres):
    """Version 4 stored every id as given: the upgrade renames another project's documents (their
    chunks and files follow) and a replica that was following the log before keeps searching."""
    old, objects = replicas("old")
    old.ingest([project_scenarios.SECRET], tenant=tenant("a"))
    objects.in_project(tenant("a")).files.add(
        "file-a", "pump", True, "pump.txt", "assistants", b"x"
    )
    with postgres.connect() as connection:  # as schema version 4 left it: `a`'s ids unqualified
        for table in ("chunks", "files"):
            connection.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_document_id_fkey")
            connection.execute(f"UPDATE {table} SET document_id = 'pump'")
        connection.execute("UPDATE documents SET id = 'pump'")
        connection.execute("ALTER TABLE chunks DROP COLUMN start_char, DROP COLUMN end_char")
        for table in ("chunks", "files"):
            connection.execute(
                f"ALTER TABLE {table} ADD CONSTRAINT {table}_document_id_fkey FOREIGN KEY "
                "(document_id) REFERENCES documents (id) ON DELETE CASCADE"
            )
        connection.execute("DELETE FROM library_schema")
        connection.execute("INSERT INTO library_schema VALUES (4)")
    upgraded, new_objects = replicas("new")
    for replica in (upgraded, old):
        assert replica.get("pump", tenant=tenant("a")).project == "a"
        found = replica.search("fault F-2291", 2, tenant=tenant("a"))
        assert [hit.document_id for hit in found] == ["pump"]
        assert replica.get("pump", tenant=DEFAULT) is None
    assert new_objects.in_project(tenant("a")).files.get("file-a").document_id == "pump"
    [taken] = upgraded.ingest([NewDocument("pump", "Default's own pump manual.")], tenant=DEFAULT)
    assert (taken.id, taken.created) == ("pump", True)
    assert (
        upgraded.store.get_document("a/pump", project=EVERY_PROJECT).project == "a"
    )  # stored qualified
    with postgres.connect() as connection:
        version = connection.execute("SELECT max(version) FROM library_schema").fetchone()
    assert version == (SCHEMA_VERSION,)
