"""Chunk KV store: keys, entry format, memory and disk tiers, and the tiered store."""
