"""Dependencies run one way (docs/architecture.md): each module belongs to a layer and imports
only from its own layer or those below, and no import cycle exists anywhere.

Layers, bottom to top: the engine (no Django); rows (models, the taxonomy's reading, audit);
serving (the live model and index, normalize); curation (inputs, queue, verdicts, flags);
jobs (builds, fine-tunes, the gate, promotion, bulk normalization); and on top the HTTP layer,
commands and Celery tasks, which orchestrate across the others.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("annotations", "models_app", "worker", "siamweb")
LAYERS = ("engine", "rows", "serving", "curation", "jobs", "top")

# First match wins; a module no rule matches fails the test, so a new one is placed on purpose.
RULES: tuple[tuple[str, str], ...] = (
    (r"models_app\.siamese(\..+)?", "engine"),
    # The project package loads the Celery app, as Celery's Django layout has it.
    (r"siamweb", "top"),
    (r"siamweb\.web(\.\w+)?", "top"),
    (r"siamweb\.(humanize|taxonomy_reads|csv_cells)", "rows"),
    # Packages whose __init__ holds nothing.
    (r"annotations|models_app|worker|annotations\.services", "rows"),
    (r"(annotations|models_app)\.management(\.commands)?", "rows"),
    (r".+\.(views|api|urls|forms|admin)(_\w+)?(\.\w+)?", "top"),
    (r".+\.management\.commands\.\w+", "top"),
    (r".+\.(decorators|permissions)", "top"),
    (r"worker\.tasks", "top"),
    (r"worker\.task_names", "rows"),  # names only, importing nothing
    (r"siamweb\.(urls|api_urls|wsgi|asgi|celery|gunicorn_config)", "top"),
    (
        r"models_app\.(services(\.\w+)?|retraining|run_execution|ranker_training|gate|promotion|finetune_recipe|selectors(\.\w+)?|bulk(_\w+)?)",
        "jobs",
    ),
    (
        r"annotations\.services\.(review(\.\w+)?|inputs_upload|taxonomy_edit(\.\w+)?|flags)",
        "curation",
    ),
    (r"annotations\.selectors(\.(queue|stats|search|history|card|flags|audit))?", "curation"),
    (r"models_app\.serving(\.\w+)?", "serving"),
    (r"(annotations|models_app|worker)\.(models|apps)", "rows"),
    (r"annotations\.(selectors\.taxonomy|selectors\.accounts|importers|markdown)", "rows"),
    (r"annotations\.services\.(audit|accounts|taxonomy|taxonomy_upload)", "rows"),
    (
        r"siamweb\.(env|parsers|middleware|settings|settings_test|plain_sql|authentication|ids"
        r"|sign_in)",
        "rows",
    ),
    (r"models_app\.charts", "rows"),  # SVG drawing from plain numbers
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


def layer_of(module: str) -> str:
    for pattern, layer in RULES:
        if re.fullmatch(pattern, module):
            return layer
    raise AssertionError(f"{module} belongs to no layer: add it to RULES in {__file__}")


def app_of(module: str) -> str:
    return module.split(".")[0]


def test_every_module_has_a_layer():
    for module in project_modules():
        assert layer_of(module) in LAYERS


def test_imports_only_go_down_or_sideways():
    modules = project_modules()
    upward = sorted(
        f"{importer} ({layer_of(importer)}) imports {imported} ({layer_of(imported)})"
        for importer, imported in imports(modules)
        if LAYERS.index(layer_of(imported)) > LAYERS.index(layer_of(importer))
    )
    assert upward == []


def test_the_engine_never_imports_django_or_the_apps():
    modules = project_modules()
    for module, path in modules.items():
        if layer_of(module) != "engine" or not module.startswith("models_app.siamese"):
            continue
        source = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from|import) (django|rest_framework|celery)\b", source, re.M), (
            module
        )
        assert not any(
            layer_of(imported) != "engine"
            for _, imported in {e for e in imports(modules) if e[0] == module}
        ), module


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
    assert {app_of(module) for module in modules} == set(PACKAGES)
    edges = imports(modules)
    assert len(edges) >= 500
    for edge in [
        ("annotations.api.inputs", "models_app.serving.normalize"),
        ("worker.tasks", "models_app.run_execution"),
        ("models_app.run_execution", "models_app.retraining"),
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
    name is written once, in worker/task_names.py, and names a task the worker registers."""
    from django.conf import settings

    from siamweb.celery import app
    from worker import task_names

    modules = project_modules()
    named = tasks_named_by_string(modules)
    assert {module for holders in named.values() for module in holders} == {"worker.task_names"}
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
