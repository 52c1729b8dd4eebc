"""Modules loaded at their first use (dupfind.lazy_import): what importing gives, threads, failures."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from dupfind.lazy_import import is_loaded, lazy_module


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package `slowpkg` whose code takes 0.2 s to run and counts its runs in a list of `log`."""
    root = tmp_path / "slowpkg"
    root.mkdir()
    (root / "__init__.py").write_text(
        "import time\n"
        "import builtins\n"
        "builtins.__dict__.setdefault('slowpkg_runs', []).append(1)\n"
        "time.sleep(0.2)\n"
        "from slowpkg.part import VALUE\n"
        "ANSWER = 42\n"
    )
    (root / "part.py").write_text("import slowpkg\nVALUE = 'part'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import builtins

    builtins.__dict__["slowpkg_runs"] = []
    yield builtins.__dict__["slowpkg_runs"]
    for name in ("slowpkg", "slowpkg.part"):
        sys.modules.pop(name, None)
    builtins.__dict__.pop("slowpkg_runs", None)


def test_importing_does_not_run_the_module_and_the_first_use_does(package):
    lazy_module("slowpkg")
    import slowpkg

    assert slowpkg.__name__ == "slowpkg" and slowpkg.__spec__.name == "slowpkg"  # read without running it
    assert package == [] and not is_loaded("slowpkg")
    assert slowpkg.ANSWER == 42 and slowpkg.VALUE == "part"  # its own imports of itself work
    assert package == [1] and is_loaded("slowpkg") and type(slowpkg) is type(sys)
    import slowpkg as again

    assert again is slowpkg and again.ANSWER == 42 and package == [1]


def test_threads_using_it_at_once_wait_for_the_whole_module(package):
    lazy_module("slowpkg")
    import slowpkg

    seen, errors = [], []

    def use() -> None:
        try:
            seen.append(slowpkg.ANSWER)
        except Exception as exc:  # noqa: BLE001  (a half-run module: the failure this test looks for)
            errors.append(exc)

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
        time.sleep(0.01)
    for thread in threads:
        thread.join()
    assert errors == [] and seen == [42] * 8 and package == [1]


def test_a_module_that_fails_fails_at_its_first_use_and_can_be_imported_again(package, tmp_path):
    init = tmp_path / "slowpkg" / "__init__.py"
    text = init.read_text()
    init.write_text("raise ImportError('broken install')\n")
    lazy_module("slowpkg")
    import slowpkg

    with pytest.raises(ImportError, match="broken install"):
        _ = slowpkg.ANSWER
    assert "slowpkg" not in sys.modules and not is_loaded("slowpkg")
    init.write_text(text)
    sys.modules.pop("slowpkg.part", None)
    import importlib

    importlib.invalidate_caches()
    assert importlib.import_module("slowpkg").ANSWER == 42


def test_a_module_imported_already_or_missing_is_left_alone():
    before = sys.modules["json"]
    lazy_module("json")
    assert sys.modules["json"] is before and is_loaded("json")
    lazy_module("no_such_module_here")
    assert "no_such_module_here" not in sys.modules and not is_loaded("no_such_module_here")


def test_the_hook_runs_once_before_the_module_code(package):
    calls = []
    lazy_module("slowpkg", before=lambda: calls.append(list(package)))
    import slowpkg

    assert calls == []
    assert slowpkg.ANSWER == 42
    assert slowpkg.VALUE == "part"
    assert calls == [[]]  # before the module's code had run (it appends to the log when it runs)
    assert package == [1]
