"""The integration suite's launch-ahead (`tests/integration/launch_ahead.py`): while one module
runs, only the next module with a server of its own has its server started, once, and a module
takes the server started for it."""

from __future__ import annotations

from types import ModuleType

from tests.integration import launch_ahead
from tests.integration.launch_ahead import LaunchAhead


def _module(name: str, settings: dict[str, str] | None = None) -> ModuleType:
    module = ModuleType(f"tests.integration.{name}")
    if settings is not None:
        setattr(module, launch_ahead.OWN_SERVER, settings)
    return module


def test_the_next_own_server_starts_once_while_the_module_before_it_runs() -> None:
    plain, steps, other, lives = (
        _module("test_plain"),
        _module("test_steps", {"A": "1"}),
        _module("test_other"),
        _module("test_lives", {"B": "2"}),
    )
    started: list[tuple[str, dict[str, str]]] = []

    def launch(name: str, settings: dict[str, str]) -> str:
        started.append((name, settings))
        return f"server {len(started)}"

    # A module that imports the attribute's name has no server of its own.
    importer = _module("test_importer")
    importer.OWN_SERVER = launch_ahead.OWN_SERVER  # type: ignore[attr-defined]
    ahead = LaunchAhead(launch, [plain, plain, importer, steps, other, lives])
    ahead.module_starts(plain)
    ahead.module_starts(plain)
    assert started == [("test_steps", {"A": "1"})]
    ahead.module_starts(steps)
    assert started[1:] == [("test_lives", {"B": "2"})]
    assert ahead.take(steps) == "server 1"
    ahead.module_starts(other)
    assert len(started) == 2  # the lives server already waits
    assert ahead.leftovers() == ["server 2"]
    assert ahead.take(lives) == "server 3"  # nothing waited for it any more: started on demand
    assert ahead.leftovers() == []
