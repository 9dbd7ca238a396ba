"""The document library: the `Library` facade, its documents and rows, the one document store
(SQLite or PostgreSQL, through a dialect), the backends that keep the vector index in step with
it, the change log replicas follow, and which chunks' KV is cached."""
