"""Installed as sitecustomize.py for every verifier the project's graders run: the workspace cannot shadow runners.

A third-party test.sh typically runs `python -m pytest` or `python -m unittest` from the repository root, where
the current directory comes first on sys.path, so a workspace `unittest.py`, `pytest.py` or `json.py` would be
imported instead of the real one and could report whatever it likes. The graders put this file first on the
verifier's PYTHONPATH (verify/verdict.py `verifier_env`); it runs at interpreter start-up, before the current
directory is added to sys.path, and puts a finder in front of all others that resolves every standard-library
module but `test` and the test runners' own packages (`PROTECTED`) from the interpreter's own folders only.
Modules of the repository under test stay importable as usual; a repository module named like a standard-library
module is not (the interpreter already ignores the workspace for the modules it imports at start-up). The
interpreter's own sitecustomize, if any, still runs. Stdlib only; a no-op where Python predates
`sys.stdlib_module_names` (3.10).
"""

import os
import sys
from importlib.machinery import PathFinder

RUNNERS = frozenset({"pytest", "_pytest", "pluggy"})  # test runners' own packages
STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) - {"test"}  # `test/` is a common repository package
PROTECTED = STDLIB | RUNNERS if STDLIB else frozenset()
HERE = os.path.dirname(os.path.abspath(__file__))


def _system_paths() -> list:
    """sys.path entries inside the interpreter's own prefixes (standard library, lib-dynload, site-packages)."""
    prefixes = {os.path.realpath(p) + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix} if p}
    out = []
    for entry in sys.path:
        real = os.path.realpath(entry) + os.sep if entry else ""
        if entry and real != HERE + os.sep and any(real.startswith(p) for p in prefixes):
            out.append(entry)
    return out


SYSTEM = _system_paths()


class StdlibFirst:
    """A meta path finder: protected top-level modules come from the interpreter's folders, never the workspace."""

    def find_spec(self, name, path=None, target=None):
        if path is not None or name.partition(".")[0] not in PROTECTED:
            return None
        return PathFinder.find_spec(name, SYSTEM)


def _chain_system_sitecustomize() -> None:
    """Run the interpreter's own sitecustomize (this file shadows it by coming first on sys.path)."""
    spec = PathFinder.find_spec("sitecustomize", SYSTEM)
    if spec is not None and spec.loader is not None and os.path.realpath(spec.origin or "") != os.path.realpath(
            __file__):
        module = type(sys)("sitecustomize")
        module.__file__ = spec.origin
        try:
            spec.loader.exec_module(module)
        except Exception:  # noqa: BLE001 - as site.py does, a broken sitecustomize must not stop the interpreter
            pass


if PROTECTED:
    sys.meta_path.insert(0, StdlibFirst())
_chain_system_sitecustomize()
