"""The import graph of the project: one direction, no circle."""

from __future__ import annotations

import grimp

PACKAGES = ("holodeck_web", "runs", "graders")


def import_cycles() -> list[list[str]]:
    """Strongly connected groups of two or more modules (imports inside functions and imports
    under TYPE_CHECKING count: a circle of annotations is still two modules that cannot be
    understood one without the other)."""
    graph = grimp.build_graph(*PACKAGES)
    modules = graph.modules
    edges = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        order[module] = low[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for target in edges[module]:
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(modules):
        if module not in order:
            visit(module)
    return cycles


def test_no_module_of_the_project_is_part_of_an_import_circle() -> None:
    assert import_cycles() == []


def test_only_the_celery_app_names_the_task_module() -> None:
    graph = grimp.build_graph(*PACKAGES)
    assert graph.find_modules_that_directly_import("runs.tasks") == set()


# What draws pages and answers the API (pyproject.toml's import-linter contract names the same).
VIEW_LAYERS = (
    "runs.web",
    "runs.api",
    "runs.templatetags",
    "runs.shared",
    "runs.compare.pages",
    "runs.compare.api",
    "runs.compare.gate_api",
)


def test_views_api_routers_and_template_tags_import_no_model() -> None:
    """They read through selectors and write through services (import-linter checks it too)."""
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    importers = graph.find_modules_that_directly_import("runs.models")
    layer = {m for m in importers if any(m == p or m.startswith(p + ".") for p in VIEW_LAYERS)}
    assert layer == set()


# The Django-free core: what the engine, the CLI and the web app all use (docs/architecture.md).
DJANGO_FREE = ("runs.core", "graders")


def test_no_module_of_the_django_free_core_reaches_django() -> None:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=True)
    core = sorted(
        module
        for module in graph.modules
        if any(module == package or module.startswith(package + ".") for package in DJANGO_FREE)
    )
    assert len(core) > 40
    reaching = [module for module in core if graph.chain_exists(module, "django")]
    assert reaching == []
