"""A small codebase, its candidates and a Python with pytest, for the execution-evidence tests.

The codebase is `calc` (add, sub, clamp); the task asks for clamp, and its reward runs the two
clamp tests of its test patch, whose file holds a third that the reward does not list (the human
fix's own test of a value inside the bounds). The candidates: two identical good fixes, another
good one, one right about clamp but wrong about add and sub (which the reward does not test and
the codebase's tests do), one that changes nothing but a comment, and one that fails;
`MISSES_INSIDE` passes the listed clamp tests and fails the third. `FIXED` is the reference fix.

The sandbox sees the host's system folders only (not this project's virtual environment), so
the tests' interpreter is a virtual environment of the system's python3 with pytest copied in,
under /var/tmp (the sandbox's /tmp is its own), named to the sandbox as a read-only folder.
"""

import importlib.util
import shutil
import subprocess
import tempfile
from pathlib import Path

SYSTEM_PYTHON = "/usr/bin/python3"
PYTEST_MODULES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py")

OPS = """\
def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def clamp(x, low, high):
    return x
"""
TEST_OPS = """\
from calc.ops import add, sub


def test_add():
    assert add(0.5, 0.25) == 0.75


def test_sub():
    assert sub(5, 3) == 2
"""
TEST_CLAMP = """\
from calc.ops import clamp


def test_clamp_low():
    assert clamp(-1, 0, 10) == 0


def test_clamp_high():
    assert clamp(11, 0, 10) == 10


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5
"""
FIXED = OPS.replace("    return x\n", "    return max(low, min(x, high))\n")
FIXED_IFS = OPS.replace("    return x\n",
                        "    if x < low:\n        return low\n    if x > high:\n        return high\n    return x\n")
BREAKS = FIXED.replace("return a + b", "return int(a) + int(b)")
# Right at both bounds the reward tests, wrong between them.
MISSES_INSIDE = OPS.replace("    return x\n", "    return low if x < low else high\n")
REWARD_TESTS = ["tests/test_clamp.py::test_clamp_low", "tests/test_clamp.py::test_clamp_high"]
INSIDE_TEST = "tests/test_clamp.py::test_clamp_inside"
CODEBASE = {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/__init__.py": "", "tests/test_ops.py": TEST_OPS}
# trajectory id -> (passed, the files it writes)
CANDIDATES = {
    "good": (True, {"calc/ops.py": FIXED}),
    "good_copy": (True, {"calc/ops.py": FIXED}),
    "also_good": (True, {"calc/ops.py": FIXED_IFS}),
    "breaks": (True, {"calc/ops.py": BREAKS}),
    "no_effect": (True, {"calc/ops.py": "# clamp is fine\n" + OPS}),
    "fails": (False, {"calc/ops.py": OPS.replace("return x\n", "return low\n")}),
}


STATEMENT = "clamp(x, low, high) returns x unchanged: clamp it."  # no example to run


def python_with_pytest(root: Path) -> Path:
    """A virtual environment of the system's python3 with pytest, at `root`/env, readable by
    the sandbox's user; its interpreter's path."""
    root.chmod(0o755)
    venv = root / "env"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    site_packages = next(venv.glob("lib/python3*/site-packages"))
    for name in PYTEST_MODULES:
        origin = Path(importlib.util.find_spec(name).origin)
        if origin.name == "__init__.py":
            shutil.copytree(origin.parent, site_packages / name)
        else:
            shutil.copy2(origin, site_packages / origin.name)
    subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
    return venv / "bin" / "python"


def sandbox_root() -> Path:
    """A fresh folder under /var/tmp, for an interpreter the sandbox may see."""
    return Path(tempfile.mkdtemp(prefix="gagar-evidence-", dir="/var/tmp"))


def environment(python: Path) -> dict:
    return {"python": str(python), "report": "pytest", "wall_seconds": 60,
            "test_command": "python -m pytest -q -rA -p no:cacheprovider {tests}"}


def write(folder: Path, files: dict) -> None:
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout


def diff(files: dict, scratch: Path) -> str:
    """The `git diff` that turns the codebase into itself with `files` written."""
    scratch.mkdir(parents=True)
    write(scratch, CODEBASE)
    git(scratch, "init", "-q")
    git(scratch, "add", "-A")
    git(scratch, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    write(scratch, files)
    git(scratch, "add", "-A")
    return git(scratch, "diff", "--cached")


def store(root: Path) -> Path:
    """A codebase store holding the codebase as the snapshot folder `calc`."""
    write(root / "calc", CODEBASE)
    return root


def records(group_id: str, python: Path, scratch: Path, *, candidates=CANDIDATES, snapshot="calc",
            reference: dict | None = None, statement: str = STATEMENT) -> list[dict]:
    """The group's rollout records, its task (statement, snapshot, test patch, reward tests,
    environment and, given the files it writes, a reference fix) on the first line."""
    lines = [{"group_id": group_id, "trajectory_id": tid, "reward": 1.0 if passed else 0.0,
              "patch": diff(files, scratch / tid)} for tid, (passed, files) in candidates.items()]
    lines[0]["task"] = {"id": group_id, "statement": statement,
                        "snapshot": snapshot, "test_patch": diff({"tests/test_clamp.py": TEST_CLAMP},
                                                                 scratch / "test_patch"),
                        "reward_tests": REWARD_TESTS, "environment": environment(python)}
    if reference is not None:
        lines[0]["task"]["reference_patch"] = diff(reference, scratch / "reference")
    return lines


SAMPLE = Path(__file__).resolve().parent.parent / "sample"


def sample_evidence(python: Path, into: Path) -> Path:
    """sample/evidence.jsonl with its tasks run by `python` (the sample names the system's
    python3 with Debian's pytest, which a test machine may lack); its snapshot is `codebase`
    of the store at sample/."""
    import json

    lines = []
    for line in (SAMPLE / "evidence.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "task" in record:
            record["task"]["environment"] = {**record["task"]["environment"], **environment(python)}
        lines.append(json.dumps(record) + "\n")
    into.write_text("".join(lines), encoding="utf-8")
    return into
