"""Server time and SQL queries of the review pages, against a render floor.

    .venv/bin/python bench/pages.py                      # SQLite in a temporary folder
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/pages.py

Builds its own database (a fresh `gagar_bench_pages` on PostgreSQL) with:
a group of 16 trajectories whose patches have 400 changed lines each; a
batch of 100,000 groups; a transcript of 10,000 turns. Each page is
requested 50 times through Django's test client (the whole stack, less the
network) and p50/p95 and the SQL query count are printed. The group page is
compared with a bare `render_to_string` of the same 16 raw patches (the
floor: what showing the text at all costs). The first, cold request of the
group page (empty caches: parse and highlight) is printed too.

Targets: group page p95 <= 150 ms, batch page p95 <= 100 ms, <= 10 queries a page.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import fresh_database  # noqa: E402

BENCH_DB = "gagar_bench_pages"
RUNS = 50
N_GROUPS = 100_000
N_TRAJECTORIES = 16
PATCH_LINES = 400
N_TURNS = 10_000


def setup_django() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        os.environ["DATABASE_URL"] = fresh_database(url, BENCH_DB)
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["GAGAR_DATA_DIR"] = tempfile.mkdtemp(prefix="gagar-bench-pages-")
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    os.environ["DEBUG"] = ""
    os.environ["DJANGO_SETTINGS_MODULE"] = "webapp.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def patch_text(seed: int, hunk_lines: int = 100) -> str:
    """A patch of PATCH_LINES changed lines over 4 Python files in hunks of
    `hunk_lines` changed lines, different per seed."""
    out = []
    per_file = PATCH_LINES // 4
    for f in range(4):
        path = f"pkg/module_{f}.py"
        out.append(f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n")
        for h, first in enumerate(range(0, per_file, hunk_lines)):
            n = min(hunk_lines, per_file - first)
            removed = n // 4
            added = n - removed
            start = 10 + 1000 * h
            out.append(f"@@ -{start},{removed + 2} +{start},{added + 2} @@ def handler_{h}(request):\n")
            out.append("     context = {}\n")
            out += [f"-    value_{i} = compute(value_{i - 1}, {i})  # old\n" for i in range(removed)]
            out += [f"+    value_{i} = compute_v{seed}(value_{i - 1}, {i}, 'x')  # new, seed {seed}\n"
                    for i in range(added)]
            out.append("     return context\n")
    return "".join(out)


def build_data():
    from django.contrib.auth.models import Group as Role
    from django.contrib.auth.models import User
    from django.db import connection

    from webapp.models import Batch, Group, Trajectory, Transcript
    from webapp.roles import RESEARCHER

    user = User.objects.create_user("bench", password="bench-password-123")
    user.groups.add(Role.objects.get_or_create(name=RESEARCHER)[0])

    small = Batch.objects.create(name="group-page", n_groups=2, n_trajectories=2 * N_TRAJECTORIES)
    groups, texts = [], []
    for name, hunk_lines in (("bench-task", 100), ("bench-task-short-hunks", 40)):
        group = Group.objects.create(
            batch=small, group_id=name, task_id=name, label="mixed",
            statement="## Bug\n\nThe handler loses values.\n\n```py\nhandler(r)\n```\n" * 3,
            n_trajectories=N_TRAJECTORIES, n_passed=10, pass_rate=10 / N_TRAJECTORIES)
        patches = [patch_text(i, hunk_lines) for i in range(N_TRAJECTORIES)]
        trajectories = Trajectory.objects.bulk_create(
            Trajectory(batch=small, group=group, trajectory_id=f"r{i}", reward=float(i < 10), passed=i < 10,
                       patch=patches[i], metrics={"num_turns": 30 + i, "output_tokens": 9000 + i},
                       content_hash=f"{hunk_lines:03d}{i:061d}")
            for i in range(N_TRAJECTORIES)
        )
        groups.append(group)
        texts.append(patches)
    turns = []
    for i in range(N_TURNS // 2):
        turns.append({"role": "assistant", "content": f"Step {i}: look at the file.", "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "bash", "arguments": f'{{"command": "sed -n {i},{i + 20}p pkg/module_1.py"}}'}}]})
        turns.append({"role": "tool", "tool_call_id": f"c{i}", "content": "    value = compute(value)\n" * 8})
    Transcript.objects.create(trajectory=trajectories[0], messages=turns)

    big = Batch.objects.create(name="batch-page", n_groups=N_GROUPS)
    labels = ["mixed", "all_pass", "all_fail", "mixed", "singleton"]
    for start in range(0, N_GROUPS, 5000):
        Group.objects.bulk_create(
            Group(batch=big, group_id=f"repo__task-{i:06d}", task_id=f"repo__task-{i:06d}",
                  statement=f"Task {i}: the parser drops the last field when the line ends with a comma.",
                  repo="owner/repo", label=labels[i % 5], n_trajectories=8, n_passed=i % 9,
                  pass_rate=(i % 9) / 8)
            for i in range(start, min(N_GROUPS, start + 5000))
        )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum does soon after a big import
    return user, groups, texts, trajectories[0], big


def measure(fn, runs=RUNS):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(round(0.95 * (len(times) - 1)))]


def queries(client, url, params=None):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, params or {})
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx.captured_queries)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    setup_django()
    from django.db import connection
    from django.template import engines
    from django.test import Client
    from django.urls import reverse

    from webapp.batches import selectors
    from webapp.models import Group
    from webapp.review import diffview, groupview

    t = time.perf_counter()
    user, groups, texts, with_transcript, big = build_data()
    print(f"# {connection.vendor}; data built in {time.perf_counter() - t:.1f}s "
          f"({N_GROUPS:,} groups, {N_TRAJECTORIES} x {PATCH_LINES}-line patches, {N_TURNS:,}-turn transcript)")
    client = Client()
    client.force_login(user)
    rows = []

    def page(name, url, params=None, headers=None, target=None):
        get = lambda: client.get(url, params or {}, headers=headers or {})  # noqa: E731
        assert get().status_code == 200
        p50, p95 = measure(get)
        rows.append((name, p50, p95, queries(client, url, params), target))
        return p50

    cold = {}
    for group in groups:
        diffview.clear_caches()
        groupview.clear_caches()
        t = time.perf_counter()
        assert client.get(reverse("group", args=[group.pk])).status_code == 200
        cold[group.group_id] = (time.perf_counter() - t) * 1000
    group_p50 = page("group page, 16 x 400 lines, 100-line hunks (load on open)",
                     reverse("group", args=[groups[0].pk]), target=150)
    eager_p50 = page("group page, 16 x 400 lines, 40-line hunks (all shown)",
                     reverse("group", args=[groups[1].pk]), target=150)
    floor_template = engines["django"].from_string("{% for p in patches %}<pre>{{ p }}</pre>{% endfor %}")
    floor_p50, floor_p95 = measure(lambda: floor_template.render({"patches": texts[0]}))

    batch_url = reverse("batch", args=[big.pk])
    page("batch page, first page of 100,000 groups", batch_url, target=100)
    deep = selectors.encode_cursor("repo__task-098999", 0)
    page("batch page, page at group 99,000 (cursor)", batch_url, {"after": deep}, target=100)
    page("batch page, label + pass-rate filter, by pass rate", batch_url,
         {"label": "mixed", "pass_min": "0.25", "pass_max": "0.75", "sort": "-pass_rate"}, target=100)
    page("batch page, htmx partial, sorted by pass rate", batch_url, {"sort": "pass_rate"},
         headers={"HX-Request": "true", "HX-Target": "groups"}, target=100)
    page("batch page, text search (scans statements)", batch_url, {"q": "task-09999"})
    page("batches page (index)", reverse("index"))
    page("transcript partial, 10,000 turns (first 100 shown)", reverse("transcript", args=[with_transcript.pk]),
         headers={"HX-Request": "true"})
    page("transcript search over 10,000 turns", reverse("transcript", args=[with_transcript.pk]), {"q": "sed -n 9"},
         headers={"HX-Request": "true", "HX-Target": f"turns-{with_transcript.pk}"})

    print(f"{'page':58} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8}  target")
    failed = False
    for name, p50, p95, n, target in rows:
        ok = "" if target is None else ("ok" if p95 <= target and n <= 10 else f"MISSED (p95 <= {target})")
        failed |= ok.startswith("MISSED")
        print(f"{name:58} {p50:8.1f} {p95:8.1f} {n:8d}  {ok}")
    for name, ms in cold.items():
        print(f"group page {name}, first request with empty caches (parse + highlight): {ms:.0f} ms")
    print(f"floor: render_to_string of the 16 raw patches: p50 {floor_p50:.2f} ms, p95 {floor_p95:.2f} ms")
    print(f"ratio group page / floor (p50): {group_p50 / floor_p50:.1f}x (100-line hunks), "
          f"{eager_p50 / floor_p50:.1f}x (40-line hunks, all shown)")
    assert Group.objects.filter(batch=big).count() == N_GROUPS
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
