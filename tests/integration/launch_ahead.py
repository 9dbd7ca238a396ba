"""A test module's own server started while the module before it runs.

A server start here takes 40-70 s, nearly all of it one process after another importing vLLM:
one core's work. The tests beside it mostly keep one core busy too (the engine runs one torch
thread), so a start overlapped with the module before costs the suite little, where a start on
demand costs all of it. A module says what its own server needs in ``OWN_SERVER`` (settings,
as ``running_server``'s ``extra_env``) and its tests ask for ``own_server`` (conftest). Only the
next module's server is started ahead: each one holds about 3.7 GB while it waits. Session
servers (the replica pair) start while the module before the first that uses them runs
(``conftest.SESSION_SERVERS_AHEAD``, through ``following``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Generic, TypeVar

OWN_SERVER = "OWN_SERVER"
"""The module attribute naming a module's own server's settings."""

S = TypeVar("S")


class LaunchAhead(Generic[S]):
    """Started servers keyed by the module that will use them; ``launch`` starts one (without
    waiting for it to be ready) from a module's name and ``OWN_SERVER`` settings."""

    def __init__(
        self, launch: Callable[[str, dict[str, str]], S], modules: Iterable[ModuleType]
    ) -> None:
        self._launch = launch
        self._modules = list(dict.fromkeys(modules))
        """Every module that will run, in the order it runs."""
        self._waiting: dict[str, S] = {}

    def module_starts(self, module: ModuleType) -> None:
        """Called before ``module``'s first test: starts the server of the module that runs next,
        if that module has one. Not further ahead: a server waiting longer holds its memory
        longer, and its start (a compiling one's takes minutes of both cores) slows other
        modules' tests."""
        upcoming = self.following(module)
        if upcoming is None or _own_server(upcoming) is None:
            return
        if upcoming.__name__ not in self._waiting:  # a second start would leak the first
            self._waiting[upcoming.__name__] = self._start(upcoming)

    def following(self, module: ModuleType) -> ModuleType | None:
        """The module that runs after ``module``, if any."""
        index = self._modules.index(module) if module in self._modules else len(self._modules)
        return self._modules[index + 1] if index + 1 < len(self._modules) else None

    def take(self, module: ModuleType) -> S:
        """``module``'s own server, started ahead or else now; the caller waits for it to be
        ready and stops it."""
        waiting = self._waiting.pop(module.__name__, None)
        return waiting if waiting is not None else self._start(module)

    def leftovers(self) -> list[S]:
        """At the session's end: the servers started ahead that no module took (their tests were
        deselected or skipped), for the caller to stop."""
        left, self._waiting = list(self._waiting.values()), {}
        return left

    def _start(self, module: ModuleType) -> S:
        settings = _own_server(module)
        if settings is None:
            raise ValueError(f"{module.__name__} has no {OWN_SERVER} settings")
        return self._launch(module.__name__.rpartition(".")[2], settings)


def _own_server(module: ModuleType) -> dict[str, str] | None:
    """``module``'s own server's settings; a module that merely imports the name has none."""
    settings = getattr(module, OWN_SERVER, None)
    return settings if isinstance(settings, dict) else None
