"""Ingest and precompute progress on ``GET /metrics``, read from the library when scraped.

``ragblend_documents{status}``: documents being ingested (``pending``), searchable
(``indexed``), with every chunk's KV stored (``cached``) or ``failed``.
``ragblend_precompute_pending_chunks``: chunks of indexed documents whose KV is still to be
precomputed: the background precompute's backlog.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import REGISTRY, GaugeMetricFamily, Metric

from retriever import DOCUMENT_STATUSES, LibraryStore, LibraryUnavailable

log = logging.getLogger(__name__)


class LibraryProgressCollector:
    def __init__(self) -> None:
        self.store: LibraryStore | None = None
        """Set once the library is open; nothing is exported before."""

    def collect(self) -> Iterator[Metric]:
        if self.store is None:
            return
        try:
            by_status, waiting = self.store.progress()
        except LibraryUnavailable:
            return  # the library's background loops report the outage, once
        except Exception:
            log.exception("could not read ingest progress for /metrics")
            return
        documents = GaugeMetricFamily(
            "ragblend_documents", "Documents in the library, by status.", labels=["status"]
        )
        for status in DOCUMENT_STATUSES:
            documents.add_metric([status], by_status.get(status, 0))
        yield documents
        yield GaugeMetricFamily(
            "ragblend_precompute_pending_chunks",
            "Chunks of indexed documents whose KV is still to be precomputed.",
            value=waiting,
        )


LIBRARY_PROGRESS = LibraryProgressCollector()
REGISTRY.register(LIBRARY_PROGRESS)
