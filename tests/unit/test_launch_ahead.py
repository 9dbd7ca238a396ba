"""The integration suite's launch-ahead (`tests/integration/launch_ahead.py`): while one module
runs, the next module's own server starts, once, and that module takes it; a module without a
server of its own (one that merely imports the settings' name) starts nothing."""

from __future__ import annotations

from types import ModuleType

from tests.integration import launch_ahead
from tests.integration.launch_ahead import LaunchAhead


def _module(name: str, settings: dict[str, str] | None = None) -> ModuleType:
    module = ModuleType(f"tests.integration.{name}")
    if settings is not None:
        setattr(module, launch_ahead.OWN_SERVER, settings)
    return module


def test_the_next_modules_server_starts_once_while_the_module_before_it_runs() -> None:
    plain, importer, steps, lives, faults = (
        _module("test_plain"),
        _module("test_importer"),
        _module("test_steps", {"A": "1"}),
        _module("test_lives", {"B": "2"}),
        _module("test_faults", {"C": "3"}),
    )
    importer.OWN_SERVER = launch_ahead.OWN_SERVER  # type: ignore[attr-defined]
    started: list[tuple[str, dict[str, str]]] = []

    def launch(name: str, settings: dict[str, str]) -> str:
        started.append((name, settings))
        return f"server {len(started)}"

    ahead = LaunchAhead(launch, [plain, plain, importer, steps, lives, faults])
    assert ahead.following(importer) is steps
    assert ahead.following(faults) is None
    ahead.module_starts(plain)  # the importer runs next: nothing to start
    assert started == []
    ahead.module_starts(importer)
    assert started == [("test_steps", {"A": "1"})]
    assert ahead.take(steps) == "server 1"
    ahead.module_starts(steps)
    assert started[1:] == [("test_lives", {"B": "2"})]
    assert ahead.take(lives) == "server 2"
    assert ahead.take(faults) == "server 3"  # nobody started it ahead: started on demand
    assert ahead.leftovers() == []
    ahead.module_starts(importer)
    assert ahead.leftovers() == ["server 4"]
