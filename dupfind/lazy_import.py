"""Modules whose code runs at the first use of one of their attributes, not when they are imported."""

from __future__ import annotations

import importlib.util
import sys
import threading
import types
from collections.abc import Callable

# Read without running the module's code: the import system looks at these when the module is
# imported again (`import polars as pl` in another module), and tools that walk sys.modules.
_PASSIVE = frozenset({"__spec__", "__name__", "__class__", "__dict__", "__loader__", "__file__"})


class _LazyModule(types.ModuleType):
    """A module not executed yet: the first attribute asked for runs its code, under a lock, so
    that a second thread asking meanwhile waits for the whole module instead of seeing half of it
    (the standard library's LazyLoader has no lock before Python 3.12)."""

    def __getattribute__(self, name: str):
        if name in _PASSIVE:
            return object.__getattribute__(self, name)
        _load(self)
        return object.__getattribute__(self, name)

    def __setattr__(self, name: str, value) -> None:
        _load(self)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        _load(self)
        object.__delattr__(self, name)


def _load(module: types.ModuleType) -> None:
    spec = object.__getattribute__(module, "__spec__")
    state = spec.loader_state
    with state["lock"]:
        if state["started"]:  # loaded by now, or being loaded by this thread (the module's own imports)
            return
        state["started"] = True
        try:
            if state["before"] is not None:
                state["before"]()
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(spec.name, None)  # a later import tries again, as after a failed import
            raise
        finally:
            object.__setattr__(module, "__class__", types.ModuleType)


def lazy_module(name: str, before: Callable[[], object] | None = None) -> None:
    """Make `import name` give a module that is executed when first used, after calling `before`.
    Nothing changes when it is imported already, or cannot be found (its import then fails as it
    would have).

    Thread-safe for attribute access. It is not made for a second thread that imports one of the
    module's submodules (`import name.sub`) while the first use runs the module's code."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader_state = {"lock": threading.RLock(), "started": False, "before": before}
    module.__class__ = _LazyModule
    sys.modules[name] = module


def is_loaded(name: str) -> bool:
    """Whether the module `name` is imported and its code has run (False for a lazy one not used yet)."""
    module = sys.modules.get(name)
    return module is not None and not isinstance(module, _LazyModule)
