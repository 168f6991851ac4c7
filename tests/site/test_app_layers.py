"""The apps import one way: tenants ← nodes ← scheduling ← plugins_admin, and every app may use heteroflow_site.
Inside scheduling, the framework imports no app (not even, through another module, a plugin or the ORM) and the
plugins never reach the ORM: both are plain Python over the in-memory snapshot.

`python -m tests.site.test_app_layers` prints the imports between apps with their counts.
"""

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("tenants", "nodes", "scheduling", "plugins_admin")
SITE = "heteroflow_site"
# The routing roots wire every app's URLs and consumers together; nothing else in the site package may name an app.
SITE_ROUTING = {"urls.py", "websocket_urls.py"}


def app_imports(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """(importing app, imported app, "file:line module") for every import of one app by another, at any depth."""
    apps = (*LAYERS, SITE)
    found = []
    for app in apps:
        for path in sorted((root / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    target = module.split(".")[0]
                    if target in apps and target != app:
                        found.append((app, target, f"{path.relative_to(root)}:{node.lineno} {module}"))
    return found


FRAMEWORK = "scheduling.framework"
PLUGINS = "scheduling.plugins"
OTHER_APPS = ("tenants", "nodes", "plugins_admin", SITE)


def _imported_modules(path: Path, root: Path) -> set[str]:
    """Every module a file imports, at any depth, absolute (a relative import resolved; `from a import b` also
    names `a.b`, which is a module when b is one)."""
    package = path.relative_to(root).parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join((*anchor, base)) if base else ".".join(anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _module_file(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def reached_modules(start: str, root: Path = ROOT) -> dict[str, str]:
    """The modules that importing the package or module `start` runs or names, through the project's own modules
    (their packages' `__init__` included), each with the project module that imports it."""
    reached: dict[str, str] = {}
    seen: set[Path] = set()
    first = _module_file(start, root)
    todo = [first] if first.name != "__init__.py" else sorted(first.parent.rglob("*.py"))
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        importer = ".".join(path.relative_to(root).with_suffix("").parts)
        for module in _imported_modules(path, root):
            if module in reached:
                continue
            reached[module] = importer
            pieces = module.split(".")
            for end in range(1, len(pieces) + 1):
                file = _module_file(".".join(pieces[:end]), root)
                if file is not None and file not in seen:
                    todo.append(file)
    return reached


def _is_orm(module: str) -> bool:
    pieces = module.split(".")
    return module == "django.db" or module.startswith("django.db.") or "models" in pieces[1:]


def _breaches(reached: dict[str, str], forbidden) -> list[str]:
    """`importer -> module` for each forbidden module, a name taken from one (`a.b` of `from a import b`) left out."""
    bad = {module for module in reached if forbidden(module)}
    return sorted(f"{reached[module]} -> {module}" for module in bad
                  if not any(module.startswith(f"{other}.") for other in bad))


def framework_breaches(root: Path = ROOT) -> list[str]:
    """What the framework reaches of another app, a plugin or the ORM."""
    return _breaches(reached_modules(FRAMEWORK, root), lambda module: module.split(".")[0] in OTHER_APPS
                     or module.startswith(PLUGINS) or _is_orm(module))


def plugin_breaches(root: Path = ROOT) -> list[str]:
    """What the plugins reach of the ORM."""
    return _breaches(reached_modules(PLUGINS, root), _is_orm)


def test_the_framework_imports_no_app_no_plugin_and_no_orm():
    assert framework_breaches() == []


def test_no_plugin_reaches_the_orm():
    assert plugin_breaches() == []


def _write(root: Path, path: str, text: str = "") -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


def test_the_purity_checks_follow_imports_through_other_modules_and_inside_functions(tmp_path):
    _write(tmp_path, "scheduling/__init__.py")
    _write(tmp_path, "scheduling/framework/__init__.py")
    _write(tmp_path, "scheduling/framework/pure.py", "import numpy as np\nfrom .other import x\n")
    _write(tmp_path, "scheduling/framework/other.py", "def f():\n    from scheduling.fair_share.book import Book\n")
    _write(tmp_path, "scheduling/fair_share/__init__.py")
    _write(tmp_path, "scheduling/fair_share/book.py", "from nodes.agent.runtime import CARDS\n")
    _write(tmp_path, "scheduling/plugins/__init__.py")
    _write(tmp_path, "scheduling/plugins/mine/__init__.py", "from scheduling.cache.reader import read\n")
    _write(tmp_path, "scheduling/cache/__init__.py")
    _write(tmp_path, "scheduling/cache/reader.py", "def read():\n    from scheduling.models import Task\n")
    assert framework_breaches(tmp_path) == ["scheduling.fair_share.book -> nodes.agent.runtime"]
    assert plugin_breaches(tmp_path) == ["scheduling.cache.reader -> scheduling.models"]
    _write(tmp_path, "scheduling/fair_share/book.py", "from django.db import transaction\n")
    _write(tmp_path, "scheduling/cache/reader.py", "import math\n")
    assert framework_breaches(tmp_path) == ["scheduling.fair_share.book -> django.db"]
    assert plugin_breaches(tmp_path) == []


def test_no_app_imports_one_above_it():
    upward = [where for source, target, where in app_imports()
              if source in LAYERS and target in LAYERS and LAYERS.index(target) > LAYERS.index(source)]
    assert upward == []


def test_the_site_package_names_apps_only_in_its_routing():
    stray = [where for source, target, where in app_imports()
             if source == SITE and Path(where.split(":")[0]).name not in SITE_ROUTING]
    assert stray == []


def test_the_check_sees_imports_inside_functions_and_skips_migrations(tmp_path):
    (tmp_path / "tenants" / "migrations").mkdir(parents=True)
    (tmp_path / "tenants" / "late.py").write_text("def f():\n    from plugins_admin.models import PluginChange\n")
    (tmp_path / "tenants" / "migrations" / "0001_x.py").write_text("import scheduling\n")
    assert app_imports(tmp_path) == [("tenants", "plugins_admin", "tenants/late.py:2 plugins_admin.models")]


if __name__ == "__main__":
    for (source, target), count in sorted(Counter((s, t) for s, t, _ in app_imports()).items()):
        print(f"{source:16} -> {target:16} {count}")
