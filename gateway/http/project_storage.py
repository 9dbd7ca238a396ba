"""Bytes each project stores, on ``GET /metrics`` and in ``GET /v1/projects``.

``ragblend_project_stored_bytes{project, kind}``: the UTF-8 bytes of the text the library keeps
for a project's documents (``documents``: their chunks' text, overlaps included) and the bytes of
its uploaded files (``files``). Read from the database when scraped, like
`gateway.http.library_metrics`; labelled only with the projects API keys name, so the labels stay
bounded by the configuration (a project whose keys were removed shows only in the admin route).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import REGISTRY, GaugeMetricFamily, Metric

from gateway.http.library_metrics import read_when_scraped
from gateway.http.projects import KeyRing

if TYPE_CHECKING:
    from retriever import RagObjects

STORED_BYTES = {"documents": "document_bytes", "files": "file_bytes"}
"""Each kind of stored bytes, and its count in `RagObjects.stored_by_project`."""


def stored_bytes(stored: Mapping[str, int]) -> dict[str, int]:
    """The bytes by kind in one project's `RagObjects.stored_by_project` counts."""
    return {kind: stored.get(count, 0) for kind, count in STORED_BYTES.items()}


class StoredBytesSource(Protocol):
    """What the collector reads of the serving app's state."""

    rag_objects: RagObjects | None
    keys: KeyRing


class ProjectStorageCollector:
    def __init__(self) -> None:
        self.state: StoredBytesSource | None = None
        """The serving app's state; nothing is exported before its OpenAI objects are open."""

    def collect(self) -> Iterator[Metric]:
        objects = None if self.state is None else self.state.rag_objects
        if self.state is None or objects is None:
            return
        stored = read_when_scraped(objects.stored_by_project, "the projects' stored bytes")
        if stored is None:
            return
        family = GaugeMetricFamily(
            "ragblend_project_stored_bytes",
            "Bytes each project stores: its documents' text and its uploaded files.",
            labels=["project", "kind"],
        )
        for project in self.state.keys.projects:
            for kind, count in stored_bytes(stored.get(project, {})).items():
                family.add_metric([project, kind], count)
        yield family


PROJECT_STORAGE = ProjectStorageCollector()
REGISTRY.register(PROJECT_STORAGE)
