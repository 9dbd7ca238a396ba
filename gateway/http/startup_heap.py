"""The server's start-up heap kept out of the garbage collector's way.

Importing vLLM, torch and transformers and loading the model make about 730,000 objects that live
as long as the process. A full collection walks every one of them (0.3-0.4 s on the project's
CPUs, the event loop stalled meanwhile), and starting triggered about ten (2-3 s of a start). So
`ragblend serve` collects nothing while it loads; once loading has ended, what loading left
is collected once and the rest frozen (as vLLM's own API server does), so later collections walk
only what serving makes.
"""

from __future__ import annotations

import gc


def pause_collection() -> None:
    """Before the server's imports: no collection until `freeze_loaded_heap`."""
    gc.disable()


def freeze_loaded_heap() -> None:
    """Once loading has ended, loaded or not (on the event loop: one collection, under 0.5 s):
    collect what loading left, exempt everything alive from later collections, collect again
    from now on."""
    gc.collect()
    gc.freeze()
    gc.enable()
