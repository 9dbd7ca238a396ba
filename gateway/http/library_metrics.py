"""Ingest and precompute progress on ``GET /metrics``, read from the library when scraped.

``ragblend_documents{status}``: documents being ingested (``pending``), searchable
(``indexed``), with every chunk's KV stored (``cached``) or ``failed``.
``ragblend_precompute_pending_chunks``: chunks of indexed documents whose KV is still to be
precomputed: the background precompute's backlog.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TypeVar

from prometheus_client.core import REGISTRY, GaugeMetricFamily, Metric

from retriever import DOCUMENT_STATUSES, LibraryStore, LibraryUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")


def read_when_scraped(read: Callable[[], T], what: str) -> T | None:
    """``read()`` for a scrape; None (nothing exported) when the library is unreachable, which
    its background loops report once, or when reading fails, logged as not read for ``what``."""
    try:
        return read()
    except LibraryUnavailable:
        return None
    except Exception:
        log.exception("could not read %s for /metrics", what)
        return None


class LibraryProgressCollector:
    def __init__(self) -> None:
        self.store: LibraryStore | None = None
        """Set once the library is open; nothing is exported before."""

    def collect(self) -> Iterator[Metric]:
        if self.store is None:
            return
        progress = read_when_scraped(self.store.progress, "ingest progress")
        if progress is None:
            return
        by_status, waiting = progress
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
