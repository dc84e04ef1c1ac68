"""The import graph of the project: one direction, no circle."""

from __future__ import annotations

import grimp

PACKAGES = ("holodeck_web", "runs", "graders")


def import_cycles() -> list[list[str]]:
    """Strongly connected groups of two or more modules (imports inside functions count;
    imports under TYPE_CHECKING do not)."""
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
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


def test_views_and_api_routers_import_no_model() -> None:
    """They read through selectors and write through services (import-linter checks it too)."""
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    importers = graph.find_modules_that_directly_import("runs.models")
    layer = {m for m in importers if m.startswith(("runs.web.", "runs.api."))}
    assert layer == set()


def test_the_trend_chart_and_the_gate_summary_import_no_django() -> None:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=True)
    for module in ("runs.charts.trend_chart", "runs.writers.gate_markdown"):
        assert graph.chain_exists(module, "django") is False
