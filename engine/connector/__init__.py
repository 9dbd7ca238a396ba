"""The out-of-tree vLLM KV connector that serves blended chunk KV (scheduler and worker halves)."""
