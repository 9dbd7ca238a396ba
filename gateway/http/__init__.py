"""HTTP plumbing shared by every route: limits, admission, errors, metrics, upload parsing,
projects and keys, shutdown and the engine watch. The gateway's lowest layer: it imports nothing
above it (the OpenAI shapes, the RAG planning, the app state, serving, the routes)."""
