"""No arrow back up: the folders of ``runs/`` are layers, and a module imports only its own
folder and the folders below it (imports inside functions and under ``TYPE_CHECKING`` count).
Inside the Django-free core the same holds for its packages: no two of them import each other,
directly or through others (``verdicts`` reads no ``comparison`` or ``wire``), nor do compare's.
Views and template tags never import each other, and the API imports no view: what they share
is in ``runs/shared/`` (docs/architecture.md draws the layers)."""

from __future__ import annotations

from collections.abc import Iterable

import grimp

from tests.architecture.test_imports import circles

PACKAGES = ("holodeck_web", "runs", "graders")

# From the bottom up; a room (a folder, or a loose module) imports only rooms at or below its
# own level. Rooms on one level do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("graders",),
    ("runs.core",),
    ("runs.case_columns", "runs.transcript_models", "runs.review_models"),
    ("runs.models",),
    ("runs.bulk_insert", "runs.mapping"),
    ("runs.selectors",),
    ("runs.recorder",),
    ("runs.services",),
    ("runs.shared",),
    ("runs.templatetags",),
    ("runs.web",),
    ("runs.api",),
    ("runs.compare",),
    ("runs.tasks", "runs.admin", "runs.management", "runs.apps", "runs.migrations"),
    ("holodeck_web",),
)
VIEWS = ("runs.web", "runs.compare.pages")
TAGS = ("runs.templatetags",)
API = ("runs.api", "runs.compare.api", "runs.compare.gate_api")


def room_of(module: str, rooms: Iterable[str]) -> str | None:
    """The longest room that holds ``module`` (a room holds itself and what is under it)."""
    holding = [room for room in rooms if module == room or module.startswith(room + ".")]
    return max(holding, key=len) if holding else None


def edges() -> set[tuple[str, str]]:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    return {
        (module, target)
        for module in graph.modules
        for target in graph.find_modules_directly_imported_by(module)
        if target in graph.modules
    }


def arrows_back_up(
    imports: Iterable[tuple[str, str]], layers: tuple[tuple[str, ...], ...]
) -> list[str]:
    """Each import of a room from a room on a higher level, or from another room of its level."""
    level = {room: n for n, rooms in enumerate(layers) for room in rooms}
    found = []
    for module, target in sorted(imports):
        source_room, target_room = room_of(module, level), room_of(target, level)
        if source_room is None or target_room is None or source_room == target_room:
            continue
        if level[source_room] <= level[target_room]:
            found.append(f"{module} -> {target}")
    return found


def package_circles(imports: Iterable[tuple[str, str]], under: str) -> list[list[str]]:
    """Groups of ``under``'s direct packages (or modules) that import each other."""

    def part(module: str) -> str | None:
        if not module.startswith(under + "."):
            return None
        return under + "." + module[len(under) + 1 :].split(".")[0]

    edges: dict[str, set[str]] = {}
    for module, target in imports:
        a, b = part(module), part(target)
        if a and b and a != b:
            edges.setdefault(a, set()).add(b)
    return circles(edges)


def crossing(
    imports: Iterable[tuple[str, str]], sources: tuple[str, ...], targets: tuple[str, ...]
) -> list[str]:
    def within(module: str, prefixes: tuple[str, ...]) -> bool:
        return any(module == p or module.startswith(p + ".") for p in prefixes)

    return sorted(f"{a} -> {b}" for a, b in imports if within(a, sources) and within(b, targets))


def test_every_room_of_the_project_is_on_a_layer() -> None:
    rooms = [room for layer in LAYERS for room in layer]
    graph = grimp.build_graph(*PACKAGES)
    placed = {module: room_of(module, rooms) for module in graph.modules}
    assert [module for module, room in placed.items() if room is None and module != "runs"] == []


def test_no_import_runs_back_up_a_layer() -> None:
    assert arrows_back_up(edges(), LAYERS) == []


def test_no_two_packages_of_the_core_or_of_compare_import_each_other() -> None:
    """Inside a room the layers say nothing; its packages still import one way."""
    imports = edges()
    assert package_circles(imports, "runs.core") == []
    assert package_circles(imports, "runs.compare") == []


def test_views_and_template_tags_do_not_import_each_other_and_the_api_imports_no_view() -> None:
    imports = edges()
    assert crossing(imports, VIEWS, TAGS) == []
    assert crossing(imports, TAGS, VIEWS) == []
    assert crossing(imports, API, VIEWS) == []


def test_the_check_finds_an_arrow_back_up_and_a_circle_of_packages() -> None:
    imports = {
        ("runs.core.verdicts.repeats", "runs.core.comparison.matrix"),
        ("runs.core.comparison.matrix", "runs.core.verdicts.outcomes"),
        ("runs.selectors.trends", "runs.compare.reads.comparison"),
        ("runs.web.row_html", "runs.templatetags.dashboard"),
        ("runs.compare.pages.views", "runs.web.params"),
    }
    assert arrows_back_up(imports, LAYERS) == [
        "runs.selectors.trends -> runs.compare.reads.comparison"
    ]
    assert package_circles(imports, "runs.core") == [["runs.core.comparison", "runs.core.verdicts"]]
    assert crossing(imports, VIEWS, TAGS) == ["runs.web.row_html -> runs.templatetags.dashboard"]
