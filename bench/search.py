"""Search in patches and transcripts over a batch of 100,000 groups, against today's
statement search.

    .venv/bin/python bench/search.py                      # SQLite in a temporary folder
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/search.py

Builds its own database (a fresh `gagar_bench_search` on PostgreSQL): a batch of
--groups groups (100,000) of 4 trajectories, each with a ~15-line patch and a
6-turn transcript of synthetic code-like text, written as an import writes them
(COPY on PostgreSQL), then indexed by the worker's own function
(webapp.search.services.batch_index) with the index in place: its time is printed
against the time the rows took to write. Then each query is asked RUNS times
through Django's test client (the search page, the whole stack less the network)
and p50/p95 printed, with the batch page's `q` filter (today's search: icontains
over group id, task id and statement, a scan) as the reference measured in the
same run.

Target: search page p95 <= 100 ms.
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import fresh_database, migrated_django  # noqa: E402

BENCH_DB = "gagar_bench_search"
RUNS = 50
N_TRAJECTORIES = 4
N_TURNS = 6
CHUNK = 2000

# (what it is, query, how often it occurs)
QUERIES = [
    ("identifier, in 1,000 patches", "get_prep_value"),
    ("dotted name, in 10,000 patches", "os.path.join"),
    ("rare word, in 80 turns", "zebrafish"),
    ("common word, in every patch", "return"),
    ("no hit", "quokka_frobnicate"),
]


def setup_django(reuse: bool) -> None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres") and reuse:
        os.environ["DATABASE_URL"] = url.rsplit("/", 1)[0] + f"/{BENCH_DB}"
    elif url.startswith("postgres"):
        os.environ["DATABASE_URL"] = fresh_database(url, BENCH_DB)
    elif reuse:
        if not os.environ.get("GAGAR_DATA_DIR"):
            sys.exit("--reuse on SQLite: set GAGAR_DATA_DIR to the folder a previous run printed")
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["GAGAR_DATA_DIR"] = tempfile.mkdtemp(prefix="gagar-bench-search-")
    migrated_django()


SYLLABLES = ["get", "set", "load", "parse", "value", "field", "item", "node", "path", "line", "data", "config",
             "user", "query", "cache", "index", "token", "model", "view", "form", "request", "result", "error"]


def vocabulary(rng: random.Random, n: int = 3000) -> list[str]:
    words = {"_".join(rng.sample(SYLLABLES, rng.randint(1, 3))) for _ in range(n * 2)}
    return sorted(words)[:n]


def patch_text(rng: random.Random, words: list[str], g: int, t: int) -> str:
    path = f"src/{rng.choice(words)}/{rng.choice(words)}.py"
    lines = [f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n",
             f"@@ -{10 + t},6 +{10 + t},7 @@ def {rng.choice(words)}(self, {rng.choice(words)}):\n"]
    for _ in range(3):
        lines.append(f"     {rng.choice(words)} = self.{rng.choice(words)}({rng.choice(words)})\n")
    lines.append(f"-    return {rng.choice(words)}\n")
    special = ("self.get_prep_value(value)" if g % 100 == 7 and t == 0 else
               "os.path.join(root, name)" if g % 10 == 3 and t == 1 else rng.choice(words))
    lines.append(f"+    {rng.choice(words)} = {special}\n")
    lines.append(f"+    return {rng.choice(words)}.{rng.choice(words)}()\n")
    lines.append(f"     # {' '.join(rng.choice(words) for _ in range(6))}\n")
    return "".join(lines)


def turns(rng: random.Random, words: list[str], g: int, t: int) -> list[tuple[str, str]]:
    out = []
    for i in range(N_TURNS):
        role = ("user", "assistant", "tool")[min(i, 1 + i % 2)]
        text = " ".join(rng.choice(words) for _ in range(20))
        if g % 5000 == 11 and i == 3:
            text += " the zebrafish fixture"
        out.append((role, text))
    return out


def build_data(n_groups: int):
    """The batch, written as an import writes its rows, then indexed by the worker's function;
    returns the user, the batch and the seconds each took."""
    from django.contrib.auth.models import Group as Role
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from webapp.bulk import insert_rows
    from webapp.models import Batch, Group, SearchState, Trajectory, Transcript
    from webapp.roles import RESEARCHER
    from webapp.search.services import batch_index

    user = User.objects.create_user("bench", password="bench-password-123")
    user.groups.add(Role.objects.get_or_create(name=RESEARCHER)[0])
    batch = Batch.objects.create(name="search", n_groups=n_groups, n_trajectories=n_groups * N_TRAJECTORIES)
    SearchState.objects.create(batch=batch)  # what the import makes
    rng = random.Random(14)
    words = vocabulary(rng)
    started = time.perf_counter()
    for start in range(0, n_groups, CHUNK):
        with transaction.atomic():
            numbers = range(start, min(n_groups, start + CHUNK))
            group_pks = insert_rows(Group, [
                {"batch_id": batch.pk, "group_id": f"repo__task-{g:06d}", "task_id": f"repo__task-{g:06d}",
                 "statement": f"Task {g}: {' '.join(rng.choice(words) for _ in range(30))}", "repo": "owner/repo",
                 "base_commit": "", "task_extra": {}, "label": "mixed", "n_trajectories": N_TRAJECTORIES,
                 "n_passed": 2, "pass_rate": 0.5} for g in numbers])
            rows, transcripts = [], []
            for g, pk in zip(numbers, group_pks, strict=True):
                for t in range(N_TRAJECTORIES):
                    rows.append({"batch_id": batch.pk, "group_id": pk, "trajectory_id": f"run-{t}",
                                 "reward": float(t % 2), "passed": bool(t % 2), "patch": patch_text(rng, words, g, t),
                                 "metrics": {}, "tests": None, "meta": {}, "content_hash": f"{g:08d}{t}"})
                    transcripts.append([{"role": role, "content": text} for role, text in turns(rng, words, g, t)])
            trajectory_pks = insert_rows(Trajectory, rows)
            insert_rows(Transcript, [{"trajectory_id": pk, "messages": messages}
                                     for pk, messages in zip(trajectory_pks, transcripts, strict=True)])
    written = time.perf_counter() - started
    started = time.perf_counter()
    batch_index(batch.pk)
    indexed = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE" if connection.vendor == "postgresql" else "PRAGMA optimize")
    return user, batch, written, indexed


def measure(fn, runs=RUNS):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(round(0.95 * (len(times) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--reuse", action="store_true",
                        help="measure the database a previous run built (same --groups); SQLite: in $GAGAR_DATA_DIR")
    args = parser.parse_args()
    setup_django(args.reuse)
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from webapp.models import Batch
    from webapp.search.services import TABLE

    if args.reuse:
        user, batch = User.objects.get(username="bench"), Batch.objects.get(name="search")
    else:
        user, batch, written, indexed = build_data(args.groups)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {TABLE}")
        (n_entries,) = cursor.fetchone()
    where = "" if connection.vendor == "postgresql" else f" in {os.environ['GAGAR_DATA_DIR']}"
    print(f"# {connection.vendor}{where}; {args.groups:,} groups x {N_TRAJECTORIES} trajectories, {n_entries:,} index "
          f"entries{', reused' if args.reuse else ''}")
    if not args.reuse:
        n = args.groups * N_TRAJECTORIES
        print(f"rows written as an import writes them: {written:.1f} s ({n / written:,.0f} trajectories/s)")
        print(f"indexed by the worker (batch_index):   {indexed:.1f} s ({n / indexed:,.0f} trajectories/s, "
              f"{n_entries / indexed:,.0f} entries/s), {indexed / written:.2f} x the time to write the rows")
    client = Client()
    client.force_login(user)
    search_url = reverse("search", args=[batch.pk])
    rows = []

    def page(name, url, params):
        response = client.get(url, params)
        assert response.status_code == 200, response.status_code
        p50, p95 = measure(lambda: client.get(url, params))
        rows.append((name, p50, p95))
        return response.content.decode()

    last = f"repo__task-{args.groups - 1:06d}"
    reference = page("reference: batch page, q over statements (today)", reverse("batch", args=[batch.pk]),
                     {"q": last})
    assert last in reference
    failed = False
    for name, q in QUERIES:
        html = page(f"search: {name} ({q})", search_url, {"q": q})
        assert ("Nothing in this batch" in html) == (q == "quokka_frobnicate"), q
    page("search: common word, page 3", search_url, {"q": "return", "after": 200})
    page("search: identifier, in patches only", search_url, {"q": "get_prep_value", "kind": "patch"})
    ref_p95 = rows[0][2]
    print(f"{'page':62} {'p50 ms':>8} {'p95 ms':>8} {'p95 / reference':>16}")
    for name, p50, p95 in rows:
        failed |= name.startswith("search") and p95 > 100
        print(f"{name:62} {p50:8.1f} {p95:8.1f} {p95 / ref_p95:16.2f}")
    print("target: search p95 <= 100 ms:", "MISSED" if failed else "ok")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
