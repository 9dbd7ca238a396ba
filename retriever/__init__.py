"""Chunking, embeddings, the vector index and the document store."""
