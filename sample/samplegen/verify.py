"""--verify: apply every patch and re-run every evaluation, command and pytest run the file claims."""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .diffs import apply_edits
from .replay import Check, Run, Task
from .taskfiles import SKIP_PARTS


def write_tree(files: dict[str, str], root: Path) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def read_tree(root: Path) -> dict[str, str]:
    out = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.is_file() and rel.parts[0] != ".git" and not SKIP_PARTS.intersection(rel.parts):
            out[rel.as_posix()] = path.read_text(encoding="utf-8")
    return out


class Verifier:
    def __init__(self, base: dict[str, str], workdir: str) -> None:
        self.base, self.workdir = base, workdir
        self.tmp = Path(tempfile.mkdtemp(prefix="gagar-sample-"))
        # the transcripts run `python`, which must be this interpreter (it has pytest)
        shim = self.tmp / "bin"
        shim.mkdir()
        (shim / "python").symlink_to(sys.executable)
        self.env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}", PYTHONDONTWRITEBYTECODE="1")
        self.env |= {"GIT_AUTHOR_NAME": "s", "GIT_AUTHOR_EMAIL": "s@example.com"}
        self.env |= {"GIT_COMMITTER_NAME": "s", "GIT_COMMITTER_EMAIL": "s@example.com"}
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.count = 0

    def fresh(self, files: dict[str, str]) -> Path:
        self.count += 1
        root = self.tmp / f"w{self.count}"
        root.mkdir()
        write_tree(files, root)
        return root

    def sh(self, args, cwd, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=120, **kw)

    def pytest_ids(self, root: Path, ids: list[str]) -> dict[str, bool]:
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", *ids]
        proc = self.sh(args, root)
        result = dict.fromkeys(ids, False)
        self.last_lines = proc.stdout.splitlines()
        self.last_text = (proc.stdout + proc.stderr).replace(str(root), self.workdir)
        for line in self.last_lines:
            for kind in ("PASSED ", "FAILED "):
                if line.startswith(kind):
                    nodeid = line[len(kind) :].split(" - ")[0]
                    if nodeid in result:
                        result[nodeid] = kind == "PASSED "
        return result

    def evaluate(self, task: Task, files: dict[str, str]) -> dict[str, bool]:
        """What the evaluation does: reset the test files, add the hidden tests, run the ids."""
        files = {p: t for p, t in files.items() if not p.startswith("tests/")}
        files |= {p: t for p, t in self.base.items() if p.startswith("tests/")}
        for path, code in task.hidden_tests.items():
            files[path] = files[path] + code
        return self.pytest_ids(self.fresh(files), task.test_ids)

    def check_task(self, task: Task) -> None:
        for nodeid, ok in self.evaluate(task, self.base).items():
            if ok != (nodeid in task.pass_to_pass):
                self.errors.append(f"{task.id}: at base, {nodeid} {'passes' if ok else 'fails'}")
        for nodeid, ok in self.evaluate(task, apply_edits(self.base, task.reference)).items():
            if not ok:
                self.errors.append(f"{task.id}: the reference patch fails {nodeid}")

    def check_patch(self, where: str, patch: str, expected: dict[str, str]) -> None:
        root = self.fresh(self.base)
        for args in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
            self.sh(args, root, check=True)
        if not patch:
            return
        (self.tmp / "p.diff").write_text(patch, encoding="utf-8")
        for args in (["git", "apply", "--check"], ["git", "apply"]):
            proc = self.sh([*args, str(self.tmp / "p.diff")], root)
            if proc.returncode:
                self.errors.append(f"{where}: {' '.join(args)}: {proc.stderr.strip()}")
                return
        if read_tree(root) != expected:
            self.errors.append(f"{where}: the patch does not reproduce the trajectory's files")
        proc = self.sh(["patch", "--dry-run", "-p1", "-R", "-i", str(self.tmp / "p.diff")], root)
        if proc.returncode:
            self.errors.append(f"{where}: patch -R --dry-run: {proc.stdout.strip()}")

    def check_run(self, run: Run, record: dict) -> None:
        where = f"{run.task.id}/{run.tid}"
        self.check_patch(where, record["patch"], run.files)
        got = self.evaluate(run.task, run.files)
        # What the tests give: a flaky evaluation recorded something else on the line.
        _, tests = run.tests_record(as_recorded=False)
        claimed = {i: i in tests["passed"] for i in run.task.test_ids}
        for nodeid in got:
            if got[nodeid] != claimed[nodeid]:
                self.errors.append(f"{where}: {nodeid}: claimed {claimed[nodeid]}, got {got[nodeid]}")
        if "error" in run.outcome and self.last_text.strip() != run.outcome["error"].strip():
            self.warnings.append(f"{where}: collection error differs:\n{self.last_text}")
        real = [line for line in self.last_lines if line.startswith("FAILED ")]
        mine = [line for line in tests["log"].splitlines() if line.startswith("FAILED ")]
        if "error" not in run.outcome and sorted(real) != sorted(mine):
            self.warnings.append(f"{where}: failure messages differ:\n" + "\n".join(real))
        for check in run.checks:
            self.check_claim(where, check)

    def check_claim(self, where: str, check: Check) -> None:
        root = self.fresh(check.files)
        if check.kind == "command":
            proc = self.sh(["bash", "-c", check.command], root)
            got = (proc.stdout + proc.stderr).replace(str(root), self.workdir).rstrip("\n")
            want = check.expected.rstrip("\n")
            if check.match == "last_line":
                got, want = got.splitlines()[-1:], want.splitlines()[-1:]
            if got != want:
                self.errors.append(f"{where}: `{check.command}`\n--- claimed\n{check.expected}\n--- got\n{got}")
            return
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", check.command, "-q"]
        proc = self.sh(args, root)
        out = (proc.stdout + proc.stderr).replace(str(root), self.workdir)
        if check.kind == "pytest_error":
            if out.strip().splitlines()[-1:] != check.expected.strip().splitlines()[-1:]:
                self.errors.append(f"{where}: pytest {check.command}: got\n{out}")
            elif out.strip() != check.expected.strip():
                self.warnings.append(f"{where}: pytest {check.command}: text differs:\n{out}")
            return
        failed = tuple(
            line.split("::", 1)[1].split(" - ")[0] for line in out.splitlines() if line.startswith("FAILED ")
        )
        counts = re.sub(r" in [0-9.]+s$", "", out.rstrip().splitlines()[-1])
        want_counts = re.sub(r" in [0-9.]+s$", "", check.expected.rstrip().splitlines()[-1])
        if failed != check.failed or counts != want_counts:
            self.errors.append(
                f"{where}: pytest {check.command}: claimed {want_counts} {check.failed}, got {counts} {failed}\n{out}"
            )
        elif re.sub(r" in [0-9.]+s\n$", "", out) != re.sub(r" in [0-9.]+s\n$", "", check.expected):
            diff = difflib.unified_diff(check.expected.splitlines(), out.splitlines(), "claimed", "real", lineterm="")
            self.warnings.append(f"{where}: pytest {check.command}: text differs\n" + "\n".join(diff))


def verify(tasks: list[Task], lines: list[str]) -> int:
    sample = tasks[0].sample
    v = Verifier(sample.codebase, sample.workdir)
    base = v.sh([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"], v.fresh(sample.codebase))
    if base.returncode:
        v.errors.append("the sample code base's own tests fail:\n" + base.stdout)
    for task in tasks:
        v.check_task(task)
    runs = [run for task in tasks for run in task.runs]
    for run, line in zip(runs, lines, strict=True):
        v.check_run(run, json.loads(line))
    shutil.rmtree(v.tmp)
    for warning in v.warnings:
        print("warning:", warning, file=sys.stderr)
    for error in v.errors:
        print("error:", error, file=sys.stderr)
    return 1 if v.errors else 0
