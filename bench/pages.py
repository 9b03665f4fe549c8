"""Server time and SQL queries of the review pages, against a render floor.

    .venv/bin/python bench/pages.py                      # SQLite in a temporary folder
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/pages.py

Builds its own database (a fresh `gagar_bench_pages` on PostgreSQL) with:
a group of 16 trajectories whose patches have 400 changed lines each; a
batch of 100,000 groups; a transcript of 10,000 turns. Each page is
requested 50 times through Django's test client (the whole stack, less the
network) and p50/p95 and the SQL query count are printed. The group page is
compared with a bare `render_to_string` of the same 16 raw patches (the
floor: what showing the text at all costs).

Cold and warm group pages side by side: each group opened once in a fresh
process state (in-process caches emptied), first with nothing in the render
store (parse + highlight), then with its renders stored, then warm; for the
two bench groups and, when /work/shared/data/public.jsonl (or $GAGAR_PUBLIC_DATA)
is there, for the real groups in it (psf__requests-863 holds a 16,000-line patch).

Targets: group page p95 <= 150 ms warm and <= 200 ms cold with stored renders,
batch page p95 <= 100 ms, <= 10 queries a page.
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

from bench import fresh_database, migrated_django  # noqa: E402

BENCH_DB = "gagar_bench_pages"
RUNS = 50
N_GROUPS = 100_000
N_TRAJECTORIES = 16
PATCH_LINES = 400
N_TURNS = 10_000
PUBLIC_DATA = Path(os.environ.get("GAGAR_PUBLIC_DATA", "/work/shared/data/public.jsonl"))
COLD_TARGET = 200  # ms, p95 of first requests with stored renders


def setup_django() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        os.environ["DATABASE_URL"] = fresh_database(url, BENCH_DB)
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["GAGAR_DATA_DIR"] = tempfile.mkdtemp(prefix="gagar-bench-pages-")
    migrated_django()


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


def import_public():
    """The real groups, imported into a batch of their own; None (and a note) without the file."""
    if not PUBLIC_DATA.exists():
        print(f"# {PUBLIC_DATA} not found: real groups skipped")
        return None
    from webapp.batches.services import batch_import
    from webapp.models import Group

    batch = batch_import(paths=[PUBLIC_DATA], batch_name="public").batch
    return list(Group.objects.filter(batch=batch).order_by("group_id"))


def p95(values):
    values = sorted(values)
    return values[int(round(0.95 * (len(values) - 1)))]


def cold_and_warm(client, groups, warm_runs=5):
    """Per group: its first request with nothing stored, its first request with its renders
    stored (both with empty in-process caches, as in a new web process), and its warm p50."""
    from django.urls import reverse

    from webapp.html import patches
    from webapp.models import PatchRender
    from webapp.review import comparison

    def timed(url):
        t = time.perf_counter()
        assert client.get(url).status_code == 200
        return (time.perf_counter() - t) * 1000

    out = {}
    for group in groups:
        url = reverse("group", args=[group.pk])
        PatchRender.objects.all().delete()
        patches.clear_caches()
        comparison.clear_caches()
        nothing = timed(url)
        patches.clear_caches()
        comparison.clear_caches()
        stored = timed(url)
        warm = statistics.median(timed(url) for _ in range(warm_runs))
        out[group.group_id] = (nothing, stored, warm)
    return out


def print_cold(title, found):
    print(f"{title}: {len(found)} groups, each opened once per state")
    print(f"  {'first request, nothing stored':44} p50 {statistics.median(v[0] for v in found.values()):7.1f} ms  "
          f"p95 {p95(v[0] for v in found.values()):7.1f} ms")
    cold = p95(v[1] for v in found.values())
    print(f"  {'first request, renders stored':44} p50 {statistics.median(v[1] for v in found.values()):7.1f} ms  "
          f"p95 {cold:7.1f} ms  {'ok' if cold <= COLD_TARGET else f'MISSED (p95 <= {COLD_TARGET})'}")
    print(f"  {'warm (p50 of 5 per group)':44} p50 {statistics.median(v[2] for v in found.values()):7.1f} ms  "
          f"p95 {p95(v[2] for v in found.values()):7.1f} ms")
    worst = max(found, key=lambda name: found[name][0])
    print(f"  slowest with nothing stored: {worst}: {found[worst][0]:.0f} ms, "
          f"renders stored {found[worst][1]:.0f} ms, warm {found[worst][2]:.0f} ms")
    return cold <= COLD_TARGET


def fill_triage(big) -> None:
    """Triage summaries over the 100,000 groups, as gradings and reviews leave them: 90% graded
    (confidence spread over [0, 1)), 2% with a top pick that edits tests, 5% ranked by a
    human (a fifth of those disputed), 1 in 20 out in the queue."""
    from django.db import connection
    from django.db.models import Case, F, FloatField, Q, Value, When
    from django.db.models.functions import Cast, Mod

    from webapp.models import Group

    def every(n, rest=0):
        return Q(**{f"id_{n}": rest})

    rows = Group.objects.filter(batch=big).annotate(**{f"id_{n}": Mod(F("id"), n) for n in (7, 10, 20, 40, 50, 100)})
    spread = Cast(Mod(F("id") * 37, 1000), FloatField()) / 1000.0
    rows.exclude(every(10)).update(grader_top=["r0", "r1"], grading_confidence=spread)
    rows.filter(every(50)).update(grader_top_flags=",edits_tests,")
    rows.filter(every(7)).update(any_flags=",debug_leftovers,")
    rows.filter(every(20)).update(
        review_state="reviewed", agreement=Cast(Mod(F("id") * 13, 21), FloatField()) / 10.0 - 1.0,
        human_disagrees=Case(When(every(40), then=Value(False)), default=Value(True)))
    rows.filter(every(100)).update(review_state="disputed")
    rows.filter(every(20, 1)).update(review_state="queued")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def triage_pages(page, batch_url) -> None:
    """The batch page's triage filters and sorts (issue #14), over the filled summaries."""
    from webapp.batches import selectors

    page("batch page, sorted by grader confidence", batch_url, {"sort": "confidence"}, target=100)
    deep = selectors.encode_cursor(0.95, 0)
    page("batch page, by confidence, page at 0.95 (cursor)", batch_url, {"sort": "confidence", "after": deep},
         target=100)
    page("batch page, top pick flagged edits_tests (2%)", batch_url, {"top_flag": "edits_tests"}, target=100)
    page("batch page, human disagrees, by agreement", batch_url, {"agreement": "disagrees", "sort": "agreement"},
         target=100)
    page("batch page, disputed (1%), htmx partial", batch_url, {"state": "disputed"},
         headers={"HX-Request": "true", "HX-Target": "groups"}, target=100)


DASHBOARD_GROUPS = 10_000
DASHBOARD_VERSIONS = 5
DASHBOARD_TARGET = 300  # ms, p95 warm and after each kind of new data; <= 15 queries
DASHBOARD_CHANGES = 5  # requests after a new datum, per kind


def dashboard_pages(page, user) -> None:
    """The audit dashboard over DASHBOARD_GROUPS audited groups (4 trajectories each, a
    reference fix, a human ranking, an audit verdict, 1 in 20 gold) graded by
    DASHBOARD_VERSIONS grader versions. Printed apart: the first request ever (nothing stored:
    the verdict rates computed, the rest queued), the worker's recompute of every part
    (figures_refresh: each group's proxy ranking stored too), and the first request after each
    kind of new datum (a verdict, a gold mark, a human ranking, a grading by the newest
    version; the stored figures shown, "updating"), DASHBOARD_CHANGES of each, p50 and p95,
    with the worker's recompute after each (p50 and max). The rows read stored figures."""
    import random

    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse
    from django.utils import timezone

    from webapp.annotation.services import ranking_save
    from webapp.audit.services import figures_refresh, gold_mark, verdict_save
    from webapp.models import (
        Annotation,
        AuditItem,
        AuditSet,
        AuditVerdict,
        Batch,
        GoldGroup,
        Grading,
        GradingRun,
        Group,
        Trajectory,
    )

    rng = random.Random(0)
    now = timezone.now()
    batch = Batch.objects.create(name="dashboard", n_groups=DASHBOARD_GROUPS)
    reference = patch_text(0, 25)[:2000]
    groups = Group.objects.bulk_create(
        Group(batch=batch, group_id=f"audit-{i:05d}", label="mixed", n_trajectories=4, n_passed=3, pass_rate=0.75,
              reference_patch=reference) for i in range(DASHBOARD_GROUPS))
    ids = ("a", "b", "c", "d")
    Trajectory.objects.bulk_create(
        (Trajectory(batch=batch, group=g, trajectory_id=tid, reward=float(k < 3), passed=k < 3,
                    patch=reference[: 400 * (k + 1) + rng.randrange(200)], metrics={"num_turns": rng.randrange(5, 60)},
                    content_hash=f"{g.pk:032d}{k:032d}") for g in groups for k, tid in enumerate(ids)),
        batch_size=5000)
    orders = [[[t] for t in rng.sample(ids[:3], 3)] for _ in range(len(groups))]
    Annotation.objects.bulk_create((Annotation(group=g, version=1, based_on_version=0, user=user, tiers=tiers)
                                    for g, tiers in zip(groups, orders, strict=True)), batch_size=5000)
    first_gradings, runs = [], []
    for v in range(DASHBOARD_VERSIONS):
        run = GradingRun.objects.create(batch=batch, grader="heuristic", queue="cpu", grader_version=f"bench-v{v}")
        runs.append(run)
        gradings = Grading.objects.bulk_create(
            (Grading(run=run, group=g, status="done" if rng.random() > 0.01 else "failed", queued_at=now,
                     finished_at=now, grader_version=f"bench-v{v}", tokens=rng.randrange(2000, 9000),
                     duration_s=rng.uniform(1, 30), tiers=tiers if rng.random() < 0.5 + 0.1 * v else tiers[::-1])
             for g, tiers in zip(groups, orders, strict=True)), batch_size=5000)
        first_gradings = first_gradings or gradings
    audit_set = AuditSet.objects.create(name="bench audit", batch=batch, size=DASHBOARD_GROUPS, design={})
    items = AuditItem.objects.bulk_create((AuditItem(audit_set=audit_set, group=g, grading=grading, position=i + 1)
                                           for i, (g, grading) in enumerate(zip(groups, first_gradings, strict=True))),
                                          batch_size=5000)
    AuditVerdict.objects.bulk_create(
        (AuditVerdict(item=item, auditor=user, verdict=rng.choice(["correct", "partly", "wrong"]),
                      categories=rng.choice([[], ["other"], ["wrong_scope", "preferred_verbose"]]))
         for item in items), batch_size=5000)
    GoldGroup.objects.bulk_create(GoldGroup(group=g, annotation_version=1, marked_by=user, marked_at=now)
                                  for g in groups[::20])
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    url = reverse("audit_dashboard")
    client = Client()
    client.force_login(user)

    def timed(params):
        with CaptureQueriesContext(connection) as ctx:
            t = time.perf_counter()
            assert client.get(url, params).status_code == 200
            return (time.perf_counter() - t) * 1000, len(ctx.captured_queries)

    def new_grading(i):  # a grading again by the newest version (a run of its own: one grading per run and group)
        finished = timezone.now()
        run = GradingRun.objects.create(batch=batch, grader="heuristic", queue="cpu",
                                        grader_version=runs[-1].grader_version)
        Grading.objects.create(run=run, group=groups[i], status="done", queued_at=finished, finished_at=finished,
                               grader_version=runs[-1].grader_version, tokens=5000, duration_s=3.0,
                               tiers=orders[i][::-1])

    changes = {
        "a verdict": lambda i: verdict_save(item=items[i], auditor=user, verdict="wrong", categories=["other"],
                                            notes=""),
        "a gold mark": lambda i: gold_mark(group=groups[1 + 20 * i], user=user),
        "a human ranking": lambda i: ranking_save(group=groups[i], user=user, tiers=orders[i][::-1], flags={},
                                                  rationales={}, group_rationale="", based_on_version=1,
                                                  grading_id=None),
        "a grading by the newest version": new_grading,
    }
    def recompute():
        t = time.perf_counter()
        figures_refresh()
        return (time.perf_counter() - t) * 1000

    for name, params in (("one batch", {"batch": batch.pk}), ("every batch", {})):
        first, n = timed(params)
        print(f"# audit dashboard, {name}: first request ever (nothing stored, the rest queued): "
              f"{first:.0f} ms, {n} queries")
        print(f"# audit dashboard, {name}: the worker's first recompute (every part"
              f"{', proxy rankings stored' if params else ''}): {recompute():.0f} ms")
        for change, make in changes.items():
            found, worker = [], []
            for i in range(DASHBOARD_CHANGES):
                make(i + (DASHBOARD_CHANGES if params else 0))
                found.append(timed(params))
                worker.append(recompute())
            worst = p95(t for t, _ in found)
            ok = "ok" if worst <= DASHBOARD_TARGET and max(q for _, q in found) <= 15 else "MISSED"
            print(f"# audit dashboard, {name}: after {change}: p50 {statistics.median(t for t, _ in found):.0f} ms, "
                  f"p95 {worst:.0f} ms, {max(q for _, q in found)} queries  {ok}; worker's recompute: "
                  f"p50 {statistics.median(worker):.0f} ms, max {max(worker):.0f} ms")
        page(f"audit dashboard, {name}: {DASHBOARD_GROUPS // 1000}k groups x {DASHBOARD_VERSIONS} versions", url,
             params, target=DASHBOARD_TARGET)


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

    # Django's own first-request work (URLconf, templates) is not the group page's: done first.
    assert client.get(reverse("index")).status_code == 200
    cold = cold_and_warm(client, groups)
    public = import_public()
    cold_public = cold_and_warm(client, public) if public else None
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
    fill_triage(big)
    triage_pages(page, batch_url)
    page("batches page (index)", reverse("index"))
    dashboard_pages(page, user)
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
    print(f"group page, cold and warm ({N_TRAJECTORIES} x {PATCH_LINES} lines, per group: "
          "nothing stored / renders stored / warm):")
    for name, (nothing, stored, warm) in cold.items():
        ok = "ok" if stored <= COLD_TARGET else f"MISSED (<= {COLD_TARGET})"
        print(f"  {name:40} {nothing:7.0f} ms / {stored:5.0f} ms / {warm:5.0f} ms  {ok}")
        failed |= stored > COLD_TARGET
    if cold_public:
        failed |= not print_cold("group page, real groups (public.jsonl)", cold_public)
    print(f"floor: render_to_string of the 16 raw patches: p50 {floor_p50:.2f} ms, p95 {floor_p95:.2f} ms")
    print(f"ratio group page / floor (p50): {group_p50 / floor_p50:.1f}x (100-line hunks), "
          f"{eager_p50 / floor_p50:.1f}x (40-line hunks, all shown)")
    assert Group.objects.filter(batch=big).count() == N_GROUPS
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
