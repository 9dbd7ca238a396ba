"""Neutral passages that chunks may be precomputed behind (``RAGBLEND_CHUNK_PREFIX=passages``).

In a RAG prompt most chunks follow other retrieved passages, not the bare prompt head. Computing
each chunk's KV after a few passages of unrelated, made-up encyclopedic text puts it in a
context of the same shape, so less of it deviates when it is reused among real passages. The
text is fixed: changing it changes the chunk store's keys.
"""

from __future__ import annotations

CONTEXT_PASSAGES = (
    "The Harbour Museum is a small maritime museum in a coastal town. It opened in the early "
    "twentieth century in a former customs house and holds ship models, navigation instruments, "
    "paintings of local vessels and records of the fishing fleet. The collection grew through "
    "donations from sailors' families, and a new wing for temporary exhibitions was added after "
    "a renovation. The museum runs guided tours, school programmes and an annual lecture series "
    "on the history of the harbour, and its archive is open to researchers by appointment.",
    "A river delta forms where a river meets a slower body of water and drops the sediment it "
    "carries. Over centuries the deposits build channels, marshes and low islands that shift "
    "with floods and tides. Deltas are often fertile and densely farmed, and many large cities "
    "grew on them because they offered both farmland and access to the sea, though they are "
    "also exposed to storms and subsidence.",
    "The annual regional chess open is a week-long tournament held each spring in a university "
    "hall. It is played over nine rounds under the Swiss system, with separate sections for "
    "rated and unrated players, and it draws several hundred entrants from neighbouring "
    "countries. The event was first organised by a local club and is now run by volunteers "
    "together with the city council.",
)
