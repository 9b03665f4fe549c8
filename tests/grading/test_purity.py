"""The core must import without Django, Celery or the app around it, and so must its tests."""

import ast
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import grading

FORBIDDEN = ("django", "celery", "kombu", "webapp", "workers")
GRADING_DIR = Path(grading.__file__).parent
ROOT = GRADING_DIR.parent


def test_no_grading_module_imports_django_celery_or_the_app():
    offenders = []
    for path in GRADING_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_importing_every_grading_module_loads_no_django_or_celery():
    modules = [m.name for m in pkgutil.walk_packages([str(GRADING_DIR)], prefix="grading.")]
    on_disk = {".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for path in GRADING_DIR.rglob("*.py")} - {"grading"}
    assert set(modules) == on_disk  # the walk misses no module, so the check below covers all
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_core_tests_run_with_no_settings_no_environment_and_no_django():
    """`pytest tests/grading` needs neither webapp.settings (its SECRET_KEY) nor Django."""
    code = (
        "import sys, pytest\n"
        "status = pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/grading/test_rankings.py'])\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "assert not loaded, loaded\n"
        "sys.exit(status)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert run.returncode == 0, run.stdout + run.stderr
