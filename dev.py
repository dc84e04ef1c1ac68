#!/usr/bin/env python3
"""Set up and run HoloDeck Web with nothing but Python >= 3.12 and the package registries.

    python3 dev.py run     # venv + install + migrate + example projects + dashboard and worker
    python3 dev.py test    # the whole test suite
    python3 dev.py check   # ruff, mypy and the import-layer contract

This file runs on any Python 3 (it may be an older default python3); it finds a Python >= 3.12
for the virtualenv itself.
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(ROOT, ".venv")
VENV_PY = os.path.join(VENV, "bin", "python")
STAMP = os.path.join(VENV, ".holodeck-installed")
AXE_DIR = os.path.join(ROOT, "tests", "web", "axe")  # axe-core, for tests/web/test_browser_a11y.py
MIN_VERSION = (3, 12)


def say(msg):
    print("[holodeck] " + msg, flush=True)


def version_of(python):
    try:
        out = subprocess.check_output(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            stderr=subprocess.DEVNULL,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    major, minor = out.strip().split(".")
    return int(major), int(minor)


def find_python():
    """The first Python >= 3.12: this interpreter, then PATH, then pyenv's versions."""
    candidates = [sys.executable]
    for name in ("python3.14", "python3.13", "python3.12", "python3", "python"):
        found = shutil.which(name)
        if found:
            candidates.append(found)
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(
        glob.glob(os.path.join(pyenv_root, "versions", "3.1[2-9]*", "bin", "python3"))
    )
    for python in candidates:
        version = version_of(python)
        if version and version >= MIN_VERSION:
            return python
    sys.exit("HoloDeck Web needs Python >= 3.12; none was found on PATH or in pyenv.")


def install_fingerprint():
    digest = hashlib.sha256()
    for name in ("pyproject.toml", "constraints.txt"):
        with open(os.path.join(ROOT, name), "rb") as fh:
            digest.update(fh.read())
    return digest.hexdigest()


def ensure_venv():
    if not os.path.exists(VENV_PY):
        python = find_python()
        say("creating the virtualenv with %s" % python)
        subprocess.check_call([python, "-m", "venv", VENV])
    fingerprint = install_fingerprint()
    if os.path.exists(STAMP) and open(STAMP).read() == fingerprint:
        return
    say("installing dependencies (first run takes a few minutes)")
    pip = [VENV_PY, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.check_call(pip + ["-c", "constraints.txt", "-e", ".[dev]"], cwd=ROOT)
    with open(STAMP, "w") as fh:
        fh.write(fingerprint)


def compile_project():
    """Byte-compile the project's own modules, as installing a package would (it is installed
    editable, so pip compiles only its dependencies): a command then starts without compiling
    them, also where PYTHONDONTWRITEBYTECODE keeps Python from caching them itself. Cheap when
    nothing changed; Python still checks each file's time and ignores a stale cache."""
    subprocess.call(
        [VENV_PY, "-m", "compileall", "-q", "-j", "0", "holodeck_web", "runs", "graders"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )


def installed_axe_version():
    try:
        with open(os.path.join(AXE_DIR, "node_modules", "axe-core", "package.json")) as fh:
            return json.load(fh).get("version")
    except (OSError, ValueError):
        return None


def ensure_axe():
    """axe-core from npm (tests/web/axe/package-lock.json) for the accessibility test, which
    skips without it (and fails in CI, where HOLODECK_REQUIRE_SERVICES is set)."""
    with open(os.path.join(AXE_DIR, "package-lock.json")) as fh:
        wanted = json.load(fh)["packages"]["node_modules/axe-core"]["version"]
    if installed_axe_version() == wanted:
        return
    npm = shutil.which("npm")
    if npm is None:
        say("npm is absent, so the accessibility test will skip (apt-get install npm)")
        return
    say("installing axe-core %s with npm ci (tests/web/axe)" % wanted)
    if subprocess.call([npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=AXE_DIR):
        say("npm ci failed in tests/web/axe, so the accessibility test will skip")


def manage(*args):
    subprocess.check_call([VENV_PY, "manage.py", *args], cwd=ROOT)


def cmd_run(argv):
    ensure_venv()
    compile_project()
    manage("migrate", "--no-input", "-v", "0")
    manage("ensure_admin")
    manage(
        "register_project", *sorted(glob.glob(os.path.join(ROOT, "examples", "*", "agent.yaml")))
    )
    # Become the server process, so Ctrl-C or a TERM reaches `serve` (which stops its children).
    os.chdir(ROOT)
    os.execv(VENV_PY, [VENV_PY, "manage.py", "serve", *argv])


def parallel_args(argv):
    """pytest-xdist's options: one worker per core (at most 8; each has a Redis database of its
    own, tests/testenv.py), unless the caller chose (-n ..., -p no:xdist). Tests that start
    processes run one at a time on one worker, and those that drive a browser on another
    (tests/conftest.py)."""
    for arg in argv:
        if arg.startswith(("-n", "--numprocesses", "--dist")) or arg in ("no:xdist", "-pno:xdist"):
            return []
    return ["-n", "auto", "--maxprocesses", "8", "--dist", "loadgroup"]


def cmd_test(argv):
    ensure_venv()
    ensure_axe()
    env = dict(os.environ, DEEPEVAL_TELEMETRY_OPT_OUT="YES", DEEPEVAL_DISABLE_DOTENV="1")
    args = [VENV_PY, "-m", "pytest"] + parallel_args(argv) + list(argv)
    return subprocess.call(args, cwd=ROOT, env=env)


def cmd_setup(argv):
    ensure_venv()
    compile_project()
    ensure_axe()


def cmd_check(argv):
    ensure_venv()
    bin_dir = os.path.join(VENV, "bin")
    steps = [
        [os.path.join(bin_dir, "ruff"), "check", "."],
        [os.path.join(bin_dir, "ruff"), "format", "--check", "."],
        [os.path.join(bin_dir, "mypy"), "holodeck_web", "runs", "graders"],
        [os.path.join(bin_dir, "lint-imports")],
    ]
    failed = 0
    for step in steps:
        say(
            "$ "
            + " ".join(os.path.basename(part) if i == 0 else part for i, part in enumerate(step))
        )
        failed |= subprocess.call(step, cwd=ROOT)
    return failed


COMMANDS = {
    "run": cmd_run,
    "test": cmd_test,
    "check": cmd_check,
    "setup": cmd_setup,
}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit("usage: python3 dev.py {run|test|check|setup} [args...]")
    code = COMMANDS[sys.argv[1]](sys.argv[2:])
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
