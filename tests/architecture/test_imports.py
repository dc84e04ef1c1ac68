"""The import graph of the project: one direction, no circle."""

from __future__ import annotations

from collections.abc import Mapping

import grimp

PACKAGES = ("holodeck_web", "runs", "graders")


def import_cycles() -> list[list[str]]:
    """Strongly connected groups of two or more modules (imports inside functions and imports
    under TYPE_CHECKING count: a circle of annotations is still two modules that cannot be
    understood one without the other)."""
    graph = grimp.build_graph(*PACKAGES)
    modules = graph.modules
    return circles({m: graph.find_modules_directly_imported_by(m) & modules for m in modules})


def circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more nodes of ``edges`` (node -> the nodes it
    points to), each sorted (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, set()):
            if target not in order:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], order[target])
        if low[node] == order[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in order:
            visit(node)
    return sorted(found)


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
