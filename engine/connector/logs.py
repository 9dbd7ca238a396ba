"""The connector's log lines in vLLM's engine processes, which configure only vLLM's logger.

The front end's process configures the root logger, so ``engine.*`` records there are printed.
vLLM's engine core and workers run in processes of their own where nothing but the ``vllm``
logger has a handler: an ``engine.*`` warning reached stderr through Python's last-resort
handler, unformatted, and every info line (the key re-rotation check, how first sightings are
computed) was lost. There the ``engine`` logger writes through vLLM's handlers at vLLM's level
(``VLLM_LOGGING_LEVEL``, which the server derives from its own log level).
"""

from __future__ import annotations

import logging


def log_like_vllm() -> None:
    """Connector construction, in the process it runs in: when the root logger has no
    handler, ``engine.*`` records go through the ``vllm`` logger's handlers at its level.
    Idempotent; does nothing in a process whose logging is configured."""
    ours, vllms = logging.getLogger("engine"), logging.getLogger("vllm")
    if logging.getLogger().handlers or ours.handlers or not vllms.handlers:
        return
    for handler in vllms.handlers:
        ours.addHandler(handler)
    ours.setLevel(vllms.getEffectiveLevel())
    ours.propagate = False
