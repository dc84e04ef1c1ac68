"""Import user code (code graders, function tools) from an agent directory.

Two agents may both ship ``graders/program.py`` or ``grader_utils.py``, and the project itself
has a top-level package named ``graders``. So a module found under the agent directory is
imported under a synthetic package unique to that directory (``_holodeck_agent_<digest>``) whose
``__path__`` is the agent directory: relative imports inside the agent's packages work, and
nothing collides in ``sys.modules``. While it runs, the agent directory is first on
``sys.path`` so that plain ``import grader_utils`` finds the agent's helper; helper modules
imported that way are dropped from ``sys.modules`` afterwards so the next agent gets its own.
Only when no such file exists under the agent directory is the module imported normally (an
installed package).

The imported code runs in this process with full rights: graders and tools are trusted, like
the agent's own code.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import re
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

GRADER_PATH_RE = re.compile(r"^[\w.]+:[\w_]+$")

# sys.path and sys.modules are process-wide; loads from several threads must not interleave.
_IMPORT_LOCK = threading.RLock()


class ResolveError(ValueError):
    """A reference to user code could not be turned into a callable (one-line cause).

    ``part`` says what was wrong: the module/file (``"module"``) or the name in it
    (``"attribute"``), so the caller can point at the right field.
    """

    def __init__(self, message: str, *, part: str = "module") -> None:
        super().__init__(message)
        self.part = part


class CodeResolver:
    """Resolves ``module.path:callable`` and ``file.py`` + ``function`` for one agent directory.

    One resolver per load: modules are imported once per load and re-imported on the next load,
    so editing a grader and re-validating picks the change up.
    """

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir.resolve()
        digest = hashlib.sha1(str(self.base_dir).encode()).hexdigest()[:12]
        self.root = f"_holodeck_agent_{digest}"
        self._modules: dict[str, types.ModuleType] = {}
        self._fresh = False

    # -- public -------------------------------------------------------------------------

    def grader(self, reference: str) -> Callable[..., Any]:
        """``"graders.program:check"`` -> the callable; ResolveError with the cause otherwise."""
        if not GRADER_PATH_RE.match(reference):
            raise ResolveError(
                f"grader {reference!r} must look like 'module.path:callable' "
                "(letters, digits, _ and . before the colon)"
            )
        module_path, _, attr = reference.partition(":")
        if any(not part for part in module_path.split(".")):
            raise ResolveError(f"grader {reference!r} has an empty module name part")
        module = self._import_dotted(module_path)
        return _callable_attr(module, attr, f"module {module_path!r}")

    def function(self, file: str, function: str) -> Callable[..., Any]:
        """``file: tools/finance.py`` + ``function: subtract`` -> the callable."""
        path = Path(file)
        if not path.is_absolute():
            path = self.base_dir / path
        if path.suffix != ".py":
            raise ResolveError(f"file {file!r} must be a Python file ending in .py")
        if not path.is_file():
            raise ResolveError(f"file {file!r} was not found (looked for {path})")
        module = self._import_file(path)
        return _callable_attr(module, function, f"file {file!r}")

    def module_files(self) -> list[Path]:
        """The files of the agent modules this resolver imported (the snapshot hashes them)."""
        files = [getattr(module, "__file__", None) for module in self._modules.values()]
        return [Path(f) for f in files if f]

    # -- importing ----------------------------------------------------------------------

    def _import_dotted(self, module_path: str) -> types.ModuleType:
        parts = module_path.split(".")
        local = self.base_dir.joinpath(*parts)
        if local.with_suffix(".py").is_file() or (local / "__init__.py").is_file():
            return self._import_local(module_path)
        try:
            return importlib.import_module(module_path)
        except ImportError as exc:
            raise ResolveError(
                f"module {module_path!r} was not found in the agent directory "
                f"({local.with_suffix('.py')}) nor as an installed module: {exc}"
            ) from exc
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # an argparse script's SystemExit must not escape
            raise ResolveError(_import_failure(module_path, exc)) from exc

    def _import_file(self, path: Path) -> types.ModuleType:
        resolved = path.resolve()
        try:
            relative = resolved.relative_to(self.base_dir).with_suffix("")
        except ValueError:
            relative = None
        if relative is not None and all(part.isidentifier() for part in relative.parts):
            return self._import_local(".".join(relative.parts))
        # Outside the agent dir, or a path that is not a dotted name: load the file on its own.
        key = f"file:{resolved}"
        if key not in self._modules:
            name = f"{self.root}_file_{hashlib.sha1(str(resolved).encode()).hexdigest()[:12]}"
            self._modules[key] = self._exec_spec(
                name, importlib.util.spec_from_file_location(name, resolved), str(resolved)
            )
        return self._modules[key]

    def _import_local(self, module_path: str) -> types.ModuleType:
        if module_path in self._modules:
            return self._modules[module_path]
        full_name = f"{self.root}.{module_path}"
        with _IMPORT_LOCK:
            self._ensure_fresh_root()
            before = set(sys.modules)
            sys.path.insert(0, str(self.base_dir))
            writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
            try:
                module = importlib.import_module(full_name)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # an argparse script's SystemExit must not escape
                raise ResolveError(_import_failure(module_path, exc)) from exc
            finally:
                sys.dont_write_bytecode = writes_bytecode
                _remove_first(sys.path, str(self.base_dir))
                self._forget_agent_helpers(before)
        self._modules[module_path] = module
        return module

    def _exec_spec(
        self, name: str, spec: importlib.machinery.ModuleSpec | None, label: str
    ) -> types.ModuleType:
        if spec is None or spec.loader is None:
            raise ResolveError(f"cannot import {label}")
        module = importlib.util.module_from_spec(spec)
        with _IMPORT_LOCK:
            before = set(sys.modules)
            sys.modules[name] = module
            sys.path.insert(0, str(self.base_dir))
            writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
            try:
                spec.loader.exec_module(module)
            except KeyboardInterrupt:
                sys.modules.pop(name, None)
                raise
            except BaseException as exc:  # an argparse script's SystemExit must not escape
                sys.modules.pop(name, None)
                raise ResolveError(_import_failure(label, exc)) from exc
            finally:
                sys.dont_write_bytecode = writes_bytecode
                _remove_first(sys.path, str(self.base_dir))
                self._forget_agent_helpers(before)
        return module

    def _ensure_fresh_root(self) -> None:
        """Once per resolver: drop modules of an earlier load of this dir, register the root."""
        if self._fresh:
            return
        for name in [n for n in sys.modules if n == self.root or n.startswith(self.root + ".")]:
            del sys.modules[name]
        root = types.ModuleType(self.root)
        root.__path__ = [str(self.base_dir)]
        root.__spec__ = importlib.machinery.ModuleSpec(self.root, None, is_package=True)
        root.__spec__.submodule_search_locations = [str(self.base_dir)]
        sys.modules[self.root] = root
        self._fresh = True

    def _forget_agent_helpers(self, before: set[str]) -> None:
        """Drop helpers the agent's code imported by plain name from its own directory."""
        for name in set(sys.modules) - before:
            if name == self.root or name.startswith(self.root):
                continue
            module_file = getattr(sys.modules.get(name), "__file__", None)
            if module_file and _is_under(Path(module_file), self.base_dir):
                del sys.modules[name]


def _callable_attr(module: types.ModuleType, attr: str, where: str) -> Callable[..., Any]:
    if not hasattr(module, attr):
        raise ResolveError(f"{where} has no attribute {attr!r}", part="attribute")
    value = getattr(module, attr)
    if not callable(value):
        raise ResolveError(
            f"{where}: {attr!r} is not callable (it is of type {type(value).__name__})",
            part="attribute",
        )
    return value  # type: ignore[no-any-return]


def _import_failure(module_path: str, exc: BaseException) -> str:
    if isinstance(exc, ResolveError):
        return str(exc)
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return f"importing {module_path!r} failed: {type(exc).__name__}: {first_line}"


def _remove_first(items: list[str], value: str) -> None:
    with contextlib.suppress(ValueError):
        items.remove(value)


def _is_under(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory)
    except (ValueError, OSError):
        return False
    return True
