"""Serving one request: its turn planned once (prompt, chunks, salted blend plan), then its
generation served as JSON or server-sent events. Above the RAG planning and the app state,
below the routes, which only translate OpenAI shapes in and out."""
