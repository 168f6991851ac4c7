"""The apps import one way: tenants ← nodes ← scheduling ← plugins_admin, and every app may use heteroflow_site.

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
