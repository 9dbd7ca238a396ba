"""The library's database: one SQLite file, or the PostgreSQL database replicas share; opening
it, its versioned schema, and connections that take the same `?`-placeholder SQL on both."""
