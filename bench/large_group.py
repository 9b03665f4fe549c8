"""One group of 50,000 trajectories, the largest supported, through every step a batch goes
through, against the same steps on a group of 5,000 in the same run.

    .venv/bin/python bench/large_group.py                      # SQLite in a temporary folder
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/large_group.py

Builds its own database (a fresh `gagar_bench_large` on PostgreSQL) and, per group size, a
batch holding one mixed group (40% pass; patches that mostly differ, some the same change,
some with debug output, stray files, edited tests or extra files; a reference fix). Steps:

- import: `import_rollouts` of the JSONL file;
- grade: `grading_launch` with the heuristic grader, then `gradings_process`, what the
  worker's task calls, in this process;
- figures: the audit dashboard's first view queues its figures, `figures_refresh` (the
  worker's task) computes them;
- group page: the group page through Django's test client, first in this process (its
  columns' patches parsed and highlighted) and again; then with the matrix's columns and the
  table's rows from the middle of the group;
- export: the advantages export to Parquet (`export_files`, what the worker builds).

Prints each step's seconds and peak RSS (the process's high-water mark, reset before each
step through /proc/self/clear_refs; Linux), and two ratios: seconds against the reference
group's scaled linearly to this size (1.0: the step grows linearly with the group; below 1:
fixed costs amortised, or a page that reads a page whatever the group's size; above 1:
worse than linear), and seconds against this size's import (the floor: reading and writing
each trajectory once).
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import fresh_database, migrated_django  # noqa: E402

BENCH_DB = "gagar_bench_large"
STEPS = ("import", "grade", "figures", "group page", "group page again", "group page, deep page", "export")


def setup_django(folder: Path) -> None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        os.environ["DATABASE_URL"] = fresh_database(url, BENCH_DB)
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ["GAGAR_DATA_DIR"] = str(folder)
    os.environ["CELERY_BROKER_URL"] = "filesystem://"  # the launch's messages wait there; no worker reads them
    os.environ["CELERY_BROKER_DIR"] = str(folder / "broker")
    migrated_django()


# --- the data ----------------------------------------------------------------------------

VOCABULARY = [f"    total_{i} = normalise(items[{i % 7}], scale={i % 13})" for i in range(400)]
CANONICAL = VOCABULARY[:4]


def patch_for(i: int, rng: random.Random) -> str:
    """A fix of pkg/core.py: the canonical one (one in ten), or a few lines drawn from a
    vocabulary; some with debug output, a stray script, an edited test or an extra file."""
    lines = CANONICAL if i % 10 == 0 else rng.sample(VOCABULARY, rng.randint(2, 9))
    if i % 17 == 0:
        lines = [*lines, "    print('debug', total_0)"]
    body = "".join(f"+{line}\n" for line in lines)
    out = [f"diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
           f"@@ -10,3 +10,{len(lines) + 2} @@ def total(items):\n     subtotal = sum(items)\n"
           f"-    return subtotal\n{body}     return subtotal\n"]
    if i % 23 == 0:
        out.append(f"diff --git a/repro_{i}.py b/repro_{i}.py\nnew file mode 100644\n--- /dev/null\n"
                   f"+++ b/repro_{i}.py\n@@ -0,0 +1,2 @@\n+from pkg.core import total\n+print(total([{i}]))\n")
    if i % 29 == 0:
        out.append("diff --git a/tests/test_core.py b/tests/test_core.py\n--- a/tests/test_core.py\n"
                   "+++ b/tests/test_core.py\n@@ -5,2 +5,2 @@ def test_total():\n-    assert total([1]) == 1\n"
                   "+    assert total([1]) == 1.0\n")
    if i % 7 == 3:
        path = f"pkg/util_{i % 40}.py"
        out.append(f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,2 +1,3 @@\n import math\n"
                   f"+SCALE = {i % 5}\n def scale(x):\n")
    return "".join(out)


def write_group(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    group_id = f"large-task-{n}"
    with path.open("w") as f:
        for i in range(n):
            record = {"group_id": group_id, "trajectory_id": f"r{i:05d}", "reward": float(i % 5 in (0, 2)),
                      "patch": patch_for(i, rng),
                      "metrics": {"num_turns": 10 + rng.randint(0, 40), "output_tokens": 500 + rng.randint(0, 5000)}}
            if i == 0:
                record["task"] = {"id": group_id, "statement": "Totals lose precision: normalise each item.",
                                  "reference_patch": patch_for(0, rng)}
            f.write(json.dumps(record) + "\n")


# --- measuring ---------------------------------------------------------------------------


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"/proc/self/status has no {field}: this bench measures memory on Linux only")


@dataclass
class Measured:
    seconds: float
    peak_mib: float  # the process's RSS high-water mark during the step
    grew_mib: float  # that mark less the RSS the step started with


def measured(fn) -> Measured:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    before = _status_kib("VmRSS")
    started = time.perf_counter()
    fn()
    seconds = time.perf_counter() - started
    peak = _status_kib("VmHWM")
    return Measured(seconds, peak / 1024, (peak - before) / 1024)


def run_size(n: int, folder: Path, user) -> dict[str, Measured]:
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    from webapp.audit import figures
    from webapp.audit.services import figures_refresh
    from webapp.exports.services import ADVANTAGES, export_files
    from webapp.grading.services import grading_launch
    from webapp.grading.worker import gradings_process
    from webapp.models import Batch, Grading
    from webapp.rankings import UNRESTRICTED, Viewer

    path = folder / f"group-{n}.jsonl"
    write_group(path, n)
    name = f"large-{n}"
    out: dict[str, Measured] = {}

    def import_():
        call_command("import_rollouts", str(path), batch=name, verbosity=0)

    out["import"] = measured(import_)
    batch = Batch.objects.get(name=name)
    group = batch.groups.get()

    def grade():
        launch = grading_launch(batch=batch, grader="heuristic")
        processed = gradings_process(grading_ids=list(launch.run.gradings.values_list("pk", flat=True)))
        assert processed.done, Grading.objects.filter(run=launch.run).values_list("status", "error")[0]

    out["grade"] = measured(grade)

    def audit_figures():
        versions = figures.grader_versions(batch)
        figures.dashboard(batch, versions, all_versions=versions, viewer=UNRESTRICTED)
        figures_refresh()
        shown = figures.dashboard(batch, versions, all_versions=versions, viewer=UNRESTRICTED)
        assert not shown.computing and shown.versions[0].ranking.graded == 1, shown

    out["figures"] = measured(audit_figures)

    client = Client()
    client.force_login(user)
    url = reverse("group", args=[group.pk])

    def page(query=""):
        response = client.get(url + query)
        assert response.status_code == 200, response.status_code

    def deep_page():  # the matrix's columns and the table's rows from the middle of the group
        page(f"?cols={n // 2}&rows={n // 2}")

    out["group page"] = measured(page)
    out["group page again"] = measured(page)
    out["group page, deep page"] = measured(deep_page)

    def export():
        target = folder / f"export-{n}"
        export_files(batch=batch, kind=ADVANTAGES, format="parquet", config=batch.advantage_config, folder=target,
                     export_id=None, created_by=user, viewer=Viewer(user))
        shutil.rmtree(target)

    out["export"] = measured(export)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=50_000, help="trajectories in the large group")
    parser.add_argument("--reference", type=int, default=5_000, help="trajectories in the reference group")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="gagar-bench-large-"))
    try:
        setup_django(folder)
        from django.contrib.auth.models import Group as Role
        from django.contrib.auth.models import User

        from webapp.roles import RESEARCHER

        user = User.objects.create_user("bench", password="bench-password-123")
        user.groups.add(Role.objects.get_or_create(name=RESEARCHER)[0])
        reference = run_size(args.reference, folder, user)
        large = run_size(args.size, folder, user)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    from django.db import connection

    scale = args.size / args.reference
    print(f"one group of {args.size:,} trajectories against one of {args.reference:,}, {connection.vendor}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} after the run")
    print(f"{'step':<24}{'ref s':>9}{'s':>9}{'peak MiB':>10}{'+MiB':>8}{'vs ref x' + format(scale, 'g'):>13}"
          f"{'vs import':>11}")
    for step in STEPS:
        r, m = reference[step], large[step]
        print(f"{step:<24}{r.seconds:>9.2f}{m.seconds:>9.2f}{m.peak_mib:>10.0f}{m.grew_mib:>8.0f}"
              f"{m.seconds / (r.seconds * scale):>13.2f}{m.seconds / large['import'].seconds:>11.2f}")


if __name__ == "__main__":
    main()
