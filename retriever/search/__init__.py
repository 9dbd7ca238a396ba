"""Finding chunks: the embedder, the FAISS vector index and its file, the follower that keeps a
replica's index in step with the shared library, chunks' nearest neighbours, and how the dense
and keyword rankings are fused."""
