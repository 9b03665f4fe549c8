"""The core must import without Django, Celery or the app around it."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import grading

FORBIDDEN = ("django", "celery", "kombu", "webapp", "workers")
GRADING_DIR = Path(grading.__file__).parent


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


def test_importing_every_grading_module_loads_no_django():
    modules = [m.name for m in pkgutil.walk_packages([str(GRADING_DIR)], prefix="grading.")]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=GRADING_DIR.parent)
