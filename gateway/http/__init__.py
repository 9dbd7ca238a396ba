"""HTTP plumbing shared by every route: limits, admission, errors, serving as JSON or SSE,
metrics, upload parsing, shutdown and the engine watch."""
