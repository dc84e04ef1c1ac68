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
the agent's own code. Each import runs under a time limit (``import_timeout``, from
HOLODECK_GRADER_IMPORT_TIMEOUT) with what it prints captured: a module that hangs at import
(a 30 s sleep, a prompt waiting on stdin) or exits (an argparse script) is reported naming its
file, with its output, instead of hanging validate and launch or writing anonymous lines to
stderr. The import runs in a helper thread the caller stops waiting for at the limit; Python
cannot stop a thread, so a hung import finishes (or sleeps) on its own, holding the import
lock, and other loads meanwhile time out the same way rather than wait behind it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import io
import re
import sys
import threading
import types
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

GRADER_PATH_RE = re.compile(r"^[\w.]+:[\w_]+$")

# sys.path and sys.modules are process-wide; loads from several threads must not interleave.
_IMPORT_LOCK = threading.RLock()

DEFAULT_IMPORT_TIMEOUT = 10.0  # seconds; HOLODECK_GRADER_IMPORT_TIMEOUT
# Imports that outlived their limit and still run (holding the import lock): named in the
# timeout of a load waiting behind one, which would otherwise be a mystery.
_OVERDUE: set[str] = set()
# Captured output shown in an error (or passed on to stderr) at most, in characters.
MAX_OUTPUT_SHOWN = 1000


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

    def __init__(self, base_dir: Path, *, import_timeout: float = DEFAULT_IMPORT_TIMEOUT) -> None:
        self.base_dir = base_dir.resolve()
        self.import_timeout = import_timeout
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

        def installed() -> types.ModuleType:
            try:
                return importlib.import_module(module_path)
            except ImportError as exc:
                raise ResolveError(
                    f"module {module_path!r} was not found in the agent directory "
                    f"({local.with_suffix('.py')}) nor as an installed module: {exc}"
                ) from exc

        return self._guarded(module_path, "", installed)

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
        local = self.base_dir.joinpath(*module_path.split("."))
        file = local.with_suffix(".py") if local.with_suffix(".py").is_file() else local
        module = self._guarded(
            module_path,
            _shown_path(file, self.base_dir),
            partial(self._import_local_now, module_path),
        )
        self._modules[module_path] = module
        return module

    def _import_local_now(self, module_path: str) -> types.ModuleType:
        full_name = f"{self.root}.{module_path}"
        with _IMPORT_LOCK:
            self._ensure_fresh_root()
            before = set(sys.modules)
            sys.path.insert(0, str(self.base_dir))
            writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
            try:
                return importlib.import_module(full_name)
            finally:
                sys.dont_write_bytecode = writes_bytecode
                _remove_first(sys.path, str(self.base_dir))
                self._forget_agent_helpers(before)

    def _exec_spec(
        self, name: str, spec: importlib.machinery.ModuleSpec | None, label: str
    ) -> types.ModuleType:
        if spec is None or spec.loader is None:
            raise ResolveError(f"cannot import {label}")
        return self._guarded(label, "", partial(self._exec_spec_now, name, spec))

    def _exec_spec_now(self, name: str, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        with _IMPORT_LOCK:
            before = set(sys.modules)
            sys.modules[name] = module
            sys.path.insert(0, str(self.base_dir))
            writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
            finally:
                sys.dont_write_bytecode = writes_bytecode
                _remove_first(sys.path, str(self.base_dir))
                self._forget_agent_helpers(before)
        return module

    def _guarded(
        self, name: str, file: str, do_import: Callable[[], types.ModuleType]
    ) -> types.ModuleType:
        """``do_import()`` in a helper thread, waited for ``import_timeout`` seconds, with what
        it writes to stdout and stderr captured. ResolveError (one line, naming the module, its
        ``file`` and quoting the output) when it is still running at the limit or raises,
        SystemExit included. Output of a successful import goes on to stderr, each line
        prefixed with the module and file, so it is never anonymous."""
        output = _LockedBuffer()
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                # sys.stdout/stderr are process-wide: while the import runs (under the import
                # lock) another thread's print lands in the buffer too; logging keeps its own
                # handle on the real stream.
                with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                    outcome["module"] = do_import()
            except BaseException as exc:  # an argparse script's SystemExit must not escape
                outcome["error"] = exc
            finally:
                _OVERDUE.discard(label)

        where = f" ({file})" if file else ""
        label = f"{name!r}{where}"
        thread = threading.Thread(target=run, name=f"holodeck-import {name}", daemon=True)
        thread.start()
        thread.join(self.import_timeout)
        if thread.is_alive():
            behind = sorted(_OVERDUE)
            _OVERDUE.add(label)
            waiting = f", waiting behind the still running import of {behind[0]}" if behind else ""
            raise ResolveError(
                f"importing {label} did not finish within {self.import_timeout:g} s "
                f"(HOLODECK_GRADER_IMPORT_TIMEOUT){waiting}{_output_note(output.getvalue())}"
            )
        error = outcome.get("error")
        if isinstance(error, ResolveError):
            raise ResolveError(f"{error}{_output_note(output.getvalue())}", part=error.part)
        if isinstance(error, KeyboardInterrupt):
            raise error
        if error is not None:
            failure = _import_failure(name, error)
            raise ResolveError(f"{failure}{where}{_output_note(output.getvalue())}") from error
        if text := output.getvalue().strip():
            for line in _shown(text).splitlines():
                sys.stderr.write(f"importing {label}: {line}\n")
        return outcome["module"]  # type: ignore[no-any-return]

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


class _LockedBuffer(io.StringIO):
    """A StringIO several threads may write to (the import's, and any printing meanwhile)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            return super().write(text)

    def getvalue(self) -> str:
        with self._lock:
            return super().getvalue()


def _shown(text: str) -> str:
    text = text.strip()
    if len(text) <= MAX_OUTPUT_SHOWN:
        return text
    return f"{text[:MAX_OUTPUT_SHOWN]}… ({len(text) - MAX_OUTPUT_SHOWN:,} more characters)"


def _output_note(text: str) -> str:
    """The captured output on one line (a ResolveError is a one-line cause)."""
    if not text.strip():
        return ""
    return "; its output: " + " | ".join(line for line in _shown(text).splitlines() if line)


def _shown_path(path: Path, base_dir: Path) -> str:
    try:
        return str(path.relative_to(base_dir))
    except ValueError:
        return str(path)


def _remove_first(items: list[str], value: str) -> None:
    with contextlib.suppress(ValueError):
        items.remove(value)


def _is_under(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory)
    except (ValueError, OSError):
        return False
    return True
