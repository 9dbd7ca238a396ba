"""The project's scripts (``scripts/*.py``, ``docker/*.py``: folders, not packages) imported as
modules the way they import each other when run: with their folder on the import path."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


def import_script(name: str, folder: Path = SCRIPTS) -> ModuleType:
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return importlib.import_module(name)
