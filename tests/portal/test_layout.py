"""The house's layout rules (style.md "Layout"), held by tests as well as by `make lint`:
the import contracts, rooms named by concept, no re-export shims, no private imports."""

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("portal", "metering", "billing", "flywheel")
# Modules named by suffix instead of by concept (views_x, selectors_x, x_urls, demo_x).
SUFFIXED = re.compile(r"/(views|selectors|services|urls|demo)_[a-z_]+(\.py|/)|/[a-z]+_urls\.py$")


def _modules():
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_import_contracts_hold():
    """Layers flywheel > billing > metering > portal, pure domain packages, and other apps
    reached only through selectors, services and domain (pyproject.toml)."""
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-3000:]


# Imports every module of the domain packages in an interpreter of its own (no settings,
# nothing imported before) and prints what of Celery and Django's database it loaded.
DOMAIN_IMPORTS = """
import importlib, pkgutil, sys
for package in ("metering.domain", "billing.domain", "flywheel.domain"):
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        importlib.import_module(info.name)
print(sorted(m for m in sys.modules if m.split(".")[0] == "celery" or m.startswith("django.db")))
"""


def test_the_domain_packages_load_neither_celery_nor_the_database():
    """The domain packages are pure (style.md): importing every module of them, and the
    kernel's pure rules they use (portal.money…), loads neither Celery nor django.db, which
    import-linter cannot see (a package's __init__ runs on any import of its modules)."""
    result = subprocess.run(
        [sys.executable, "-c", DOMAIN_IMPORTS],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]"


def test_no_module_is_named_by_suffix():
    found = [
        str(p.relative_to(ROOT)) for p in _modules() if SUFFIXED.search(f"/{p.relative_to(ROOT)}")
    ]
    assert found == []


def test_no_init_only_re_exports():
    """An __init__.py holds a docstring or nothing (models/ registers Django's models; the
    Celery app is loaded by PortalConfig.ready, not by portal/__init__.py)."""
    found = []
    for path in _modules():
        if path.name != "__init__.py" or "models" in path.parts:
            continue
        body = ast.parse(path.read_text()).body
        code = [
            n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        ]
        if code:
            found.append(str(path.relative_to(ROOT)))
    assert found == []


def test_no_module_imports_another_modules_private_names():
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
                if node.module == _module_name(path):
                    continue
                found += [
                    f"{path.relative_to(ROOT)}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert found == []


# What scoping rows to a tenant looks like: the kernel's rule, or a filter on a tenant field.
SCOPING_CALLS = {"tenant_scoped"}
TENANT_FIELD = re.compile(r"^tenant(_id|__.+)?$")


def _is_view_or_api(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    return "views" in parts or "api" in parts or path.stem in ("views", "api")


def test_views_and_api_modules_never_scope_rows_by_tenant_themselves():
    """Tenant scoping happens in selectors (style.md): a page, an API operation or an export
    asks a selector for the user's rows, so all three give the same rows for the same user."""
    found = []
    for path in filter(_is_view_or_api, _modules()):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if name in SCOPING_CALLS:
                found.append(f"{where} {name}()")
            elif name in ("filter", "exclude") and any(
                k.arg and TENANT_FIELD.match(k.arg) for k in node.keywords
            ):
                found.append(f"{where} .{name}(tenant…)")
    assert found == []


def test_the_kpi_read_is_built_in_one_place():
    """Pages, the API, /metrics, exports and the flywheel's jobs read KPIs through
    `kpi_read(period)` (flywheel/selectors/measurement.py), the one place that builds the
    KPI read, so the same period gives the same figures everywhere."""
    built = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in _modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "FactoryData"
    ]
    assert len(built) == 1 and built[0].startswith("flywheel/selectors/measurement.py:"), built
