"""The backend registry (runs.core.backends.base): a worker's preloading of the backends' SDKs."""

from __future__ import annotations

import subprocess
import sys

from tests.web.services_helpers import REPO


def test_preloading_imports_each_named_backends_module_once_and_leaves_out_none() -> None:
    code = (
        "import sys; from runs.core.backends.base import backends_preload; "
        "print(backends_preload(['anthropic', 'scripted', 'scripted', 'none'])); "
        "print('runs.core.backends.claude_agent_sdk' in sys.modules, "
        "'runs.core.backends.semantic_kernel' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == [
        "['runs.core.backends.claude_agent_sdk', 'runs.core.backends.scripted']",
        "True False",  # only what was named
    ]
