"""Pure-torch maths of CacheBlend: RoPE re-rotation, HKVD selection, selective attention."""
