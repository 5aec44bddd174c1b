"""Dependencies run one way (docs/architecture.md, "Parts"): every module is in one part, each
part imports only from itself and the parts the table names, models_app imports of annotations
only what "Between the apps" lists, and no import cycle exists anywhere.

The parts are read from the docs, so the table and the imports cannot drift apart: a module in
no part, a path the table names that holds no module, and an import the table does not allow
each fail a test.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGES = ("annotations", "models_app", "worker", "siamweb")
# Services and selectors speak no HTTP: these belong to views, API and middleware.
HTTP_MODULES = re.compile(
    r"^\s*(from|import) (django\.(http|shortcuts|template)|rest_framework)\b", re.M
)
SPEAK_NO_HTTP = ("serving", "curation", "training", "ranker fits", "bulk")


@dataclass(frozen=True)
class Part:
    name: str
    paths: tuple[str, ...]  # files, and folders ending in "/"
    may_import: frozenset[str]


def section(title: str) -> str:
    """The text of a ``##``/``###`` section of docs/architecture.md, up to the next heading."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    found = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#)", text, re.M | re.S)
    assert found, f"docs/architecture.md has no section {title!r}"
    return found.group(1)


def documented_parts() -> dict[str, Part]:
    """The table of parts in docs/architecture.md: part, the paths it holds, what it imports."""
    parts: dict[str, Part] = {}
    for line in section("Parts").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("part", "") or set(cells[0]) <= {"-"}:
            continue
        name, holds, may_import = cells
        imports_named = {p.strip() for p in may_import.split(",")} - {"—", ""}
        parts[name] = Part(name, tuple(re.findall(r"`([^`]+)`", holds)), frozenset(imports_named))
    return parts


def part_of_path(path: str, parts: dict[str, Part]) -> str:
    """The part whose longest path holds ``path`` (relative to the repository)."""
    holding = [
        (len(entry), part.name)
        for part in parts.values()
        for entry in part.paths
        if path == entry or (entry.endswith("/") and path.startswith(entry))
    ]
    assert holding, f"{path} is in no part: add it to the table in docs/architecture.md"
    return max(holding)[1]


def module_parts(modules: dict[str, Path], parts: dict[str, Part]) -> dict[str, str]:
    return {
        module: part_of_path(path.relative_to(ROOT).as_posix(), parts)
        for module, path in modules.items()
    }


def wrong_imports(
    edges: set[tuple[str, str]], placed: dict[str, str], parts: dict[str, Part]
) -> list[str]:
    """Each import its part may not make, as "importer (part) imports imported (part)"."""
    return sorted(
        f"{importer} ({placed[importer]}) imports {imported} ({placed[imported]})"
        for importer, imported in edges
        if placed[imported] != placed[importer]
        and placed[imported] not in parts[placed[importer]].may_import
    )


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def imports(modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(importer, imported) for every import between project modules: absolute and relative,
    at the top of a module or inside a function."""

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges = set()
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            for name in names:
                target = owner(name) if name.split(".")[0] in PACKAGES else None
                if target and target != module:
                    edges.add((module, target))
    return edges


def tasks_named_by_string(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Each string in the product that names a Celery task, with the modules that hold it."""
    named: dict[str, list[str]] = {}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and re.fullmatch(
                r"worker\.tasks\.\w+", str(node.value)
            ):
                named.setdefault(node.value, []).append(module)
    return named


def test_the_table_of_parts_is_whole():
    """Every part the table names as imported exists; a path is in one part only and holds a
    module; and the parts themselves run one way (no two parts import each other, even
    through others)."""
    parts = documented_parts()
    assert len(parts) >= 10
    for part in parts.values():
        assert part.may_import <= set(parts), (part.name, part.may_import - set(parts))
    entries = [entry for part in parts.values() for entry in part.paths]
    assert len(entries) == len(set(entries)), "a path is in two parts"
    files = {path.relative_to(ROOT).as_posix() for path in project_modules().values()}
    for entry in entries:
        assert any(f == entry or (entry.endswith("/") and f.startswith(entry)) for f in files), (
            f"{entry} holds no module"
        )
    graph = {name: set(part.may_import) for name, part in parts.items()}
    assert [c for c in strongly_connected(graph) if len(c) > 1] == []


def test_every_module_is_in_a_part():
    parts = documented_parts()
    placed = module_parts(project_modules(), parts)
    assert set(placed.values()) == set(parts), "a part holds no module"


def test_every_import_is_one_its_part_may_make():
    modules = project_modules()
    parts = documented_parts()
    assert wrong_imports(imports(modules), module_parts(modules, parts), parts) == []


def test_a_wrong_import_planted_in_any_part_fails(tmp_path):
    """For each part, a copy of one of its modules gains an import of a part it may not use;
    the walk and the check find exactly that import."""
    modules = project_modules()
    parts = documented_parts()
    placed = module_parts(modules, parts)
    edges = imports(modules)
    by_part: dict[str, list[str]] = {}
    for module, part in sorted(placed.items()):
        by_part.setdefault(part, []).append(module)
    for name, part in parts.items():
        forbidden = [p for p in parts if p != name and p not in part.may_import]
        assert forbidden, f"{name} may import every part: nothing keeps it in its place"
        importer, imported = by_part[name][0], by_part[forbidden[0]][0]
        copy = tmp_path / name.replace(" ", "_") / modules[importer].name
        copy.parent.mkdir()
        copy.write_text(modules[importer].read_text(encoding="utf-8") + f"\nimport {imported}\n")
        planted = imports({**modules, importer: copy})
        assert planted - edges == {(importer, imported)}
        assert wrong_imports(planted, placed, parts) == [
            f"{importer} ({name}) imports {imported} ({forbidden[0]})"
        ]


def test_models_app_imports_of_annotations_only_what_the_docs_list():
    listed = set(re.findall(r"^- `(annotations/[^`]+)`", section("Between the apps"), re.M))
    assert listed, "docs/architecture.md lists nothing under Between the apps"
    modules = project_modules()
    used = {
        modules[imported].relative_to(ROOT).as_posix()
        for importer, imported in imports(modules)
        if importer.startswith("models_app") and imported.startswith("annotations")
    }
    assert used == listed


def test_services_and_selectors_speak_no_http():
    modules = project_modules()
    placed = module_parts(modules, documented_parts())
    speaking = sorted(
        module
        for module, path in modules.items()
        if placed[module] in SPEAK_NO_HTTP and HTTP_MODULES.search(path.read_text(encoding="utf-8"))
    )
    assert speaking == []


def test_the_engine_never_imports_django_or_the_apps():
    modules = project_modules()
    placed = module_parts(modules, documented_parts())
    for module, path in modules.items():
        if placed[module] != "engine":
            continue
        source = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from|import) (django|rest_framework|celery)\b", source, re.M), (
            module
        )


def test_no_import_cycle_anywhere():
    modules = project_modules()
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for importer, imported in imports(modules):
        graph[importer].add(imported)
    cycles = [sorted(component) for component in strongly_connected(graph) if len(component) > 1]
    assert cycles == []


def test_it_finds_the_project_and_its_imports():
    """The checks above pass on nothing if the walk finds nothing: it must see every package,
    the modules a normalize request and a verdict pass through, and their imports."""
    modules = project_modules()
    assert len(modules) >= 150
    assert {module.split(".")[0] for module in modules} == set(PACKAGES)
    edges = imports(modules)
    assert len(edges) >= 500
    for edge in [
        ("models_app.serving.api", "models_app.serving.normalize"),
        ("worker.tasks", "models_app.training.run_execution"),
        ("models_app.training.run_execution", "models_app.training.retraining"),
        ("models_app.serving.normalize", "models_app.siamese.ranker.candidates"),
    ]:
        assert edge in edges, edge


def test_relative_and_local_imports_are_read(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .sub import leaf\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "leaf.py").write_text("def f():\n    from ..sub import other\n")
    (package / "sub" / "other.py").write_text("from . import leaf\nimport pkg.sub.leaf\n")
    modules = {
        "annotations": package / "__init__.py",
        "annotations.sub": package / "sub" / "__init__.py",
        "annotations.sub.leaf": package / "sub" / "leaf.py",
        "annotations.sub.other": package / "sub" / "other.py",
    }
    assert imports(modules) == {
        ("annotations", "annotations.sub"),
        ("annotations", "annotations.sub.leaf"),
        ("annotations.sub.leaf", "annotations.sub"),
        ("annotations.sub.leaf", "annotations.sub.other"),
        ("annotations.sub.other", "annotations.sub"),
        ("annotations.sub.other", "annotations.sub.leaf"),
    }


def test_a_cycle_is_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert [sorted(c) for c in strongly_connected(graph) if len(c) > 1] == [["a", "b", "c"]]


def test_tasks_are_named_once_and_every_name_is_a_task():
    """Modules below the worker queue tasks by name (importing the worker would point up): each
    name is written once, in siamweb/task_names.py, and names a task the worker registers."""
    from django.conf import settings

    from siamweb import task_names
    from siamweb.celery import app

    modules = project_modules()
    named = tasks_named_by_string(modules)
    assert {module for holders in named.values() for module in holders} == {"siamweb.task_names"}
    # Beside the task names, the module names the queues they go to.
    names = {
        value
        for key, value in vars(task_names).items()
        if key.isupper() and str(value).startswith("worker.tasks.")
    }
    assert names == set(named)
    app.loader.import_default_modules()
    registered = {name for name in app.tasks if name.startswith("worker.tasks.")}
    assert names == registered
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert scheduled | set(settings.CELERY_TASK_ROUTES) <= registered


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively (the graph is small, but recursion depth is not free)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components
