"""The import rules of ARCHITECTURE.md, read from the source with ``ast`` (nothing here imports privilog).

* Layers: ``rules`` (the policies, as data) < ``dsl`` < ``engine`` < ``proofs`` < ``privilog``; a module
  never imports a higher layer. The first four are folders at the top of the repository, installed as
  ``privilog.rules``, ``privilog.dsl``, ``privilog.engine`` and ``privilog.proofs`` (pyproject.toml maps
  them), and are named so here.
* Rooms of ``privilog``: an application room (``repl``, ``testing``, ``pipeline``, ``serve``, ``ranger``) and a shared
  module (``api``, ``render``, ``store``, ``usage``) import the shared modules and the layers below, never an
  application room but their own; only ``cli`` (and ``python -m privilog``) dispatches to them.
* No two modules import each other, directly or around a circle: every import counts, at the top
  of a module, inside a function, or under ``TYPE_CHECKING``.
* PySpark is imported only by ``engine.spark`` and ``privilog.pipeline``, and never at a module's top.
* ``privilog check`` loads neither networkx, pyDatalog nor PySpark, nor any extra's library, nor the prover;
  with its policy in the cache (dsl/cache.py), not Lark either.
* The face imports from the engine only what ``engine/__init__.py``'s ``SURFACE`` lists, and that table
  names only what is there.
* A module over 600 lines says why in its docstring.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("rules", "dsl", "engine", "proofs", "privilog")  # where each layer's source is, bottom first
LAYERS = (*(f"privilog.{f}" for f in FOLDERS[:-1]), "privilog")  # the same, as modules
APPLICATIONS = {"repl", "testing", "pipeline", "serve", "ranger"}
SHARED = {"__init__", "api", "render", "store", "usage"}  # the face's bottom: any room may import these
DISPATCHERS = {"cli", "__main__"}  # may import any room
SPARK_ALLOWED = ("privilog.engine.spark", "privilog.pipeline")
NEVER_ON_CHECK = (
    "networkx",
    "pyDatalog",
    "pyspark",
    # the extras' libraries (pyproject.toml) and what only other commands need: a cold start pays for each
    "starlette",
    "uvicorn",
    "psycopg",
    "graphviz",
    "hypothesis",
    "pyarrow",
    "prompt_toolkit",
    "importlib.metadata",
    "privilog.proofs.prover",
)


@dataclass(frozen=True)
class Import:
    """One import statement's target, where it is, and whether it runs when the module loads."""

    importer: str
    target: str
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] != "privilog":
        parts.insert(0, "privilog")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the four layers, by dotted name."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[_module_name(path)] = path
    return found


def _package(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


@cache
def imports() -> tuple[Import, ...]:
    """Every import in every module (any depth of the tree), resolved to the module it names."""
    known = modules()
    found = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    package = _package(name, path).split(".")
                    anchor = ".".join(package[: len(package) - node.level + 1])
                    base = f"{anchor}.{base}" if base else anchor
                # `from package import module` names the module; `from module import name` the module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            found += [Import(name, target, node.lineno) for target in targets]
    return tuple(found)


def _ours(target: str) -> str | None:
    """The module of ours an import target names (its longest known prefix), or None."""
    known = modules()
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def _layer(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if module == layer or module.startswith(layer + "."))


def _face(module: str) -> bool:
    """A module of the top layer, privilog's face (not one of the layers installed beneath it)."""
    return _layer(module) == len(LAYERS) - 1


def _room(module: str) -> str:
    """The room of a privilog module: ``cli``, ``repl``, ..., ``api``; ``__init__`` for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _edges() -> list[tuple[str, str, int]]:
    edges = set()
    for found in imports():
        target = _ours(found.target)
        if target is not None and target != found.importer:
            edges.add((found.importer, target, found.line))
    return sorted(edges)


def test_the_modules_are_found() -> None:
    assert {"privilog.dsl", "privilog.engine.authorizer", "privilog.proofs.prover", "privilog.api"} <= set(modules())
    assert len(_edges()) > 100


def test_no_layer_imports_a_higher_one() -> None:
    upward = [
        f"{modules()[a].relative_to(ROOT)}:{line}: {a} imports {b}" for a, b, line in _edges() if _layer(b) > _layer(a)
    ]
    assert not upward, "\n".join(upward)


def test_a_room_of_the_face_imports_no_other_application() -> None:
    crossing = []
    for a, b, line in _edges():
        if not (_face(a) and _face(b)):
            continue
        importer, imported = _room(a), _room(b)
        if importer in DISPATCHERS or imported == importer or imported in SHARED:
            continue
        crossing.append(f"{modules()[a].relative_to(ROOT)}:{line}: {a} (room {importer}) imports {b} (room {imported})")
    assert not crossing, "\n".join(crossing)


def test_every_room_says_what_it_is_and_what_it_may_import() -> None:
    for room in ("cli", "repl", "testing", "pipeline", "render"):
        init = ROOT / "privilog" / room / "__init__.py"
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert docstring and "import" in docstring.lower(), f"{init} needs a docstring saying what it may import"


def test_no_two_modules_import_each_other() -> None:
    graph = nx.DiGraph()
    graph.add_nodes_from(modules())
    graph.add_edges_from((a, b) for a, b, _ in _edges())
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_pyspark_is_imported_only_by_the_spark_backend_and_the_pipeline() -> None:
    elsewhere = [
        f"{modules()[found.importer].relative_to(ROOT)}:{found.line}: {found.target}"
        for found in imports()
        if found.target.split(".")[0] in ("pyspark", "py4j") and not found.importer.startswith(SPARK_ALLOWED)
    ]
    assert not elsewhere, "\n".join(elsewhere)


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "user:a", "namespace.get", "namespace:n"],
        ["check", "user:a", "namespace.get", "namespace:n", "--world", "privilog/samples/world.yaml", "--explain"],
    ],
    ids=["empty world", "sample world, explained"],
)
def test_privilog_check_loads_no_heavy_library(argv: list[str], tmp_path: Path) -> None:
    assert _loaded_by(argv, tmp_path / "cache", NEVER_ON_CHECK) == []


def test_privilog_check_with_its_policy_cached_does_not_parse_it(tmp_path: Path) -> None:
    argv = ["check", "user:a", "namespace.get", "namespace:n"]
    assert _loaded_by(argv, tmp_path / "cache", ("lark",)) == ["lark"]  # the first parses, and keeps it
    assert _loaded_by(argv, tmp_path / "cache", ("lark",)) == []


def _loaded_by(argv: list[str], cache_dir: Path, watched: tuple[str, ...]) -> list[str]:
    """Which of ``watched`` a new process running ``privilog ARGV`` loaded."""
    script = (
        "import sys\n"
        "from privilog.cli import main\n"
        f"code = main({argv!r})\n"
        f"print(code, *sorted(m for m in {watched!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "PRIVILOG_CACHE_DIR": str(cache_dir)}
    env.pop("PRIVILOG_CACHE", None)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    code, *loaded = done.stdout.split("\n")[-2].split()
    assert code in ("0", "1"), done.stdout
    return loaded


def test_every_package_is_shipped() -> None:
    """A subpackage missing from pyproject.toml works from the repository and is absent when installed."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    packages = {name for name, path in modules().items() if path.name == "__init__.py"}
    assert packages - listed == set()


def _architecture_tree() -> set[str]:
    """The paths ARCHITECTURE.md's tree names (``dsl/check.py``, ``engine/compiled/plan.py``, ...)."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = text.split("```", 2)[1].splitlines()[1:]
    named: set[str] = set()
    folders: list[str] = []
    for line in block:
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        entry = line.strip().split("  ")[0]
        del folders[depth:]
        for name in entry.split(", "):
            named.add("/".join([*folders, name.rstrip("/")]))
        if entry.endswith("/"):
            folders.append(entry.rstrip("/"))
    return named


def test_the_architecture_tree_names_every_module() -> None:
    named = _architecture_tree()
    missing = sorted(
        str(path.relative_to(ROOT))
        for top in ("dsl", "engine", "proofs", "privilog")
        for path in (ROOT / top).rglob("*.py")
        if path.name != "__init__.py" and str(path.relative_to(ROOT)) not in named
    )
    assert missing == [], "ARCHITECTURE.md's tree does not name these modules: " + ", ".join(missing)


def _loaded_with_the_module(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports that run when a module is imported: at its top, outside ``if TYPE_CHECKING:`` and functions."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            pending += [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            pending += [*node.body, *node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)]
    return found


def test_pyspark_is_imported_inside_functions_so_that_importing_a_module_does_not_start_it() -> None:
    """ARCHITECTURE.md's rule 4: in ``engine/spark/`` and ``privilog/pipeline/``, PySpark is imported
    inside functions or under ``TYPE_CHECKING``, never when the module loads."""
    at_top = []
    for name, path in modules().items():
        if not name.startswith(SPARK_ALLOWED):
            continue
        for node in _loaded_with_the_module(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(t.split(".")[0] in ("pyspark", "py4j") for t in targets):
                at_top.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not at_top, "PySpark imported at a module's top: " + ", ".join(sorted(at_top))


def _engine_surface() -> dict[str, tuple[str, ...]]:
    """``SURFACE`` of engine/__init__.py, read as data."""
    tree = ast.parse((ROOT / "engine" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "SURFACE":
            assert node.value is not None
            surface: dict[str, tuple[str, ...]] = ast.literal_eval(node.value)
            return surface
    raise AssertionError("engine/__init__.py defines no SURFACE")


def _top_level_names(path: Path) -> set[str]:
    """What ``from module import name`` can take from a module: what it defines or imports at its top."""
    names: set[str] = set()
    top = ast.parse(path.read_text(encoding="utf-8")).body
    for node in [*top, *(n for block in top if isinstance(block, ast.If) for n in block.body)]:  # TYPE_CHECKING
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def test_the_face_reaches_the_engine_only_through_its_surface() -> None:
    """The face imports from the engine only the modules and names ``engine/__init__.py`` lists; a
    module of the surface imported whole (``from privilog.engine.spark import facade``) is used only
    for the names listed for it."""
    surface = _engine_surface()
    outside = []
    for name, path in modules().items():
        if not _face(name):
            continue
        where = path.relative_to(ROOT)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        whole: dict[str, str] = {}  # a surface module imported whole: the name it is bound to -> the module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                outside += [
                    f"{where}:{node.lineno}: import {alias.name} (write `from privilog.engine.MODULE import NAME`)"
                    for alias in node.names
                    if alias.name.startswith("privilog.engine")
                ]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("privilog.engine"):
                module = (node.module or "").removeprefix("privilog.engine").lstrip(".")
                for alias in node.names:
                    inner = f"{module}.{alias.name}".lstrip(".")
                    if inner in surface:
                        whole[alias.asname or alias.name] = inner
                    elif module not in surface:
                        outside.append(f"{where}:{node.lineno}: {node.module} is not on the engine's surface")
                    elif alias.name not in surface[module]:
                        outside.append(f"{where}:{node.lineno}: {alias.name} is not on the engine's surface of {node.module}")
        outside += [
            f"{where}:{node.lineno}: {node.value.id}.{node.attr} is not on the engine's surface"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in whole
            and node.attr not in surface[whole[node.value.id]]
        ]
    assert not outside, "\n".join(outside)


def test_the_engine_surface_names_what_is_there() -> None:
    wrong = []
    for module, names in _engine_surface().items():
        path = modules().get(f"privilog.engine.{module}")
        if path is None:
            wrong.append(f"engine/__init__.py: SURFACE names a module privilog.engine.{module} that does not exist")
            continue
        there = _top_level_names(path)
        wrong += [f"engine/__init__.py: SURFACE names {module}.{n}, which is not there" for n in names if n not in there]
        wrong += [f"engine/__init__.py: SURFACE names {module}.{n}, a private name" for n in names if n.startswith("_")]
    assert not wrong, "\n".join(wrong)


def test_a_module_over_600_lines_says_why() -> None:
    unexplained = []
    for path in modules().values():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > 600 and "600 lines" not in (ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(f"{path.relative_to(ROOT)}: {lines} lines, and its docstring does not say why")
    assert not unexplained, "a module over 600 lines says why in its docstring (a sentence naming `600 lines`):\n" + "\n".join(
        unexplained
    )


def test_every_test_module_has_a_name_of_its_own() -> None:
    """pytest imports test modules by their basename (the folders are not packages): two of one name in
    different folders stop the whole run at collection."""
    seen: dict[str, Path] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        assert path.name not in seen, f"{path.relative_to(ROOT)} and {seen[path.name].relative_to(ROOT)}: rename one"
        seen[path.name] = path
