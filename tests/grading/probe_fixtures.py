"""Fixtures for the probes' tests (tracing against the reference fix, the issue's examples): the
`calc` codebase with an interval class, a reference fix of clamp that refuses inverted bounds,
candidates, and the bwrap sandbox with a python that has pytest.

A test module re-exports the fixtures it uses (`sandbox = probe_fixtures.sandbox`).
"""

import ast
import shutil
import tempfile
from pathlib import Path

import pytest

from grading.execution import Environment
from grading.execution.probes import run_probe
from grading.execution.selection import join_patches
from grading.sandbox import BwrapSandbox, SandboxConfig, check_backend
from grading.sandbox.bwrap import SYSTEM_PATHS
from tests.evidencedata import OPS, git, write
from tests.evidencedata import environment as evidence_environment

INTERVAL = """\
class Interval:
    def __init__(self, low, high):
        self.low, self.high = low, high

    def __repr__(self):
        return f"Interval({self.low}, {self.high})"

    def clamp(self, x):
        return x
"""
# The codebase's own test of clamp's inverted bounds, which takes any outcome.
TEST_BOUNDS = """\
from calc.ops import clamp


def test_inverted_bounds_end_somehow():
    try:
        clamp(30, 20, 5)
    except ValueError:
        pass
"""
CODEBASE = {"calc/__init__.py": "", "calc/ops.py": OPS, "calc/interval.py": INTERVAL, "tests/__init__.py": "",
            "tests/test_bounds.py": TEST_BOUNDS}
CLAMPED = "    return max(low, min(x, high))\n"
REFUSES_INVERTED = "    if low > high:\n        raise ValueError('low > high')\n"
INTERVAL_FIXED = INTERVAL.replace("        return x\n", "        return max(self.low, min(x, self.high))\n")
REFERENCE = {"calc/ops.py": OPS.replace("    return x\n", REFUSES_INVERTED + CLAMPED),
             "calc/interval.py": INTERVAL_FIXED}
# The listed reward tests, and one the reward does not list that calls clamp with inverted bounds.
TEST_CLAMP = """\
import pytest

from calc.interval import Interval
from calc.ops import clamp


def test_clamp_low():
    assert clamp(-1, 0, 10) == 0


def test_clamp_high():
    assert clamp(11, 0, 10) == 10


def test_interval():
    assert Interval(0, 10).clamp(11) == 10


def test_clamp_inverted():
    with pytest.raises(ValueError):
        clamp(20, 10, 0)
"""
REWARD_TESTS = ("tests/test_clamp.py::test_clamp_low", "tests/test_clamp.py::test_clamp_high",
                "tests/test_clamp.py::test_interval")
TEST_FILE = ("tests/test_clamp.py",)
# Passes the listed tests, and returns a bound where the reference raises.
CLAMPS_INVERTED = {"calc/ops.py": OPS.replace("    return x\n", CLAMPED), "calc/interval.py": INTERVAL_FIXED}
# Behaves like the reference, written otherwise.
ALIKE = {"calc/ops.py": OPS.replace("    return x\n", "    if high < low:\n        raise ValueError('inverted')\n"
                                    "    if x < low:\n        return low\n    return high if x > high else x\n"),
         "calc/interval.py": INTERVAL_FIXED}


@pytest.fixture(scope="module")
def bwrap_installed():
    check_backend(SandboxConfig("bwrap"))  # scripts/sandbox.sh installs it


@pytest.fixture(scope="module")
def codebase(tmp_path_factory):
    folder = tmp_path_factory.mktemp("codebase")
    write(folder, CODEBASE)
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return folder


@pytest.fixture(scope="module")
def patch_of(codebase, tmp_path_factory):
    """The patch that writes `files` into the codebase."""
    scratch = tmp_path_factory.mktemp("scratch")

    def patch_of(files: dict) -> str:
        folder = Path(tempfile.mkdtemp(dir=scratch))
        shutil.copytree(codebase, folder / "copy")
        write(folder / "copy", files)
        git(folder / "copy", "add", "-A")
        return git(folder / "copy", "diff", "--cached")

    return patch_of


@pytest.fixture(scope="module")
def test_patch(patch_of):
    return patch_of({"tests/test_clamp.py": TEST_CLAMP})


@pytest.fixture(scope="module")
def sandbox(bwrap_installed, sandbox_python):
    return BwrapSandbox(readonly_paths=(*SYSTEM_PATHS, str(sandbox_python.parents[1])))


@pytest.fixture(scope="module")
def environment(sandbox_python):
    return Environment.from_dict(evidence_environment(sandbox_python))


@pytest.fixture(scope="module")
def workroot():
    """Where the probes' copies go: a folder the sandbox's user may enter."""
    folder = Path(tempfile.mkdtemp(prefix="gagar-probe-work-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def probe(codebase, patch_of, test_patch, sandbox, environment, workroot):
    """Probe the codebase with `files` written, as the reward applies them (the test patch on
    top), its tests of the test patch's file run; the base code when `files` is None."""

    def probe(files: dict | None, **options):
        patch = "" if files is None else join_patches(patch_of(files), test_patch)
        options.setdefault("tests", TEST_FILE)
        return run_probe(codebase, patch, environment=environment, sandbox=sandbox, workroot=workroot,
                         seconds=120, **options)

    return probe


def sandbox_side_imports(source: str) -> set[str]:
    """The top-level packages a script that runs in the task's interpreter imports, once it
    parses as Python 3.6 (old task environments still run it)."""
    tree = ast.parse(source, feature_version=(3, 6))
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    names += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    return {name.split(".")[0] for name in names}
