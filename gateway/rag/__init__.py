"""The bridge from a request to the engine: token ids with explicit chunk spans, the blend
plan, retrieval from the library, chunk-KV precompute and the generation stream."""
