"""The SQL on a grading worker's path, one named function per statement.

Plain SQL rather than the ORM: the ORM took as long to build each of these as
PostgreSQL took to answer it, a millisecond a chunk or more. What differs
between PostgreSQL and SQLite (JSON functions, commit durability, planner
statistics) is decided here and nowhere else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.db import connection

from webapp.models import Grading, GradingRun, Group, Trajectory


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _fetch(sql: str, params: Sequence) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def relax_commit() -> None:
    """On PostgreSQL, let this transaction's commit return before its WAL reaches disk.

    Safe for grading because every state a grading can fall back to is one the sweep
    recovers: should the database crash within the next moment, a grading reverts to
    queued or running, exactly as if its worker had been lost; it is never half written.
    Worth it because a worker commits twice per task and a flush costs milliseconds."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def analyze_gradings() -> None:
    """Bring PostgreSQL's statistics of the Grading table up to date after a large launch.

    Until autovacuum analyses the table (within a minute, and only once a tenth of it has
    changed) they say that hardly any grading is queued, and the planner claims each chunk
    by reading every queued row rather than looking its ids up: a claim that costs more the
    larger the launch."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {_table(Grading)}")


def claimed_gradings(status: str, token: str) -> list[tuple]:
    """(grading pk, run pk, attempts, group pk, group id, statement, repo) of the gradings in
    `status` under the claim `token`, by grading pk."""
    return _fetch("SELECT g.id, g.run_id, g.attempts, g.group_id, gr.group_id, gr.statement,"
                  f" gr.repo FROM {_table(Grading)} g JOIN {_table(Group)} gr ON gr.id = g.group_id"
                  " WHERE g.status = %s AND g.claim_token = %s ORDER BY g.id", [status, token])


def claimed_runs(status: str, token: str) -> dict[int, GradingRun]:
    """The runs of the gradings in `status` under the claim `token`, by pk (unsaved copies)."""
    rows = _fetch(f"SELECT id, batch_id, grader, config, queue, grader_version FROM {_table(GradingRun)} WHERE id IN"
                  f" (SELECT run_id FROM {_table(Grading)} WHERE status = %s AND claim_token = %s)",
                  [status, token])
    return {pk: GradingRun(pk=pk, batch_id=batch, grader=grader, config=json.loads(config), queue=queue,
                           grader_version=version)
            for pk, batch, grader, config, queue, version in rows}


def claimed_trajectories(status: str, token: str, run_pk: int, *, tests: bool) -> list[tuple]:
    """(pk, group pk, trajectory id, passed, reward, patch, metrics[, tests]) of the groups of
    run `run_pk`'s gradings in `status` under `token`, by group and trajectory id; JSON
    columns as text. Without `tests` the tests column is not read.

    Found through the claimed rows rather than by a list of group ids: PostgreSQL then looks
    each group up in the index even before it has statistics of trajectories imported a
    moment ago, where for a list of ids it plans a scan of the whole table."""
    return _fetch("SELECT t.id, t.group_id, t.trajectory_id, t.passed, t.reward, t.patch, t.metrics"
                  f"{', t.tests' if tests else ''}"
                  f" FROM {_table(Grading)} g JOIN {_table(Trajectory)} t ON t.group_id = g.group_id"
                  " WHERE g.status = %s AND g.claim_token = %s AND g.run_id = %s"
                  " ORDER BY t.group_id, t.trajectory_id", [status, token, run_pk])


def write_results(rows: list[dict], *, status: str, finished_at, claimed_status: str, token: str) -> set[int]:
    """Set `status`, an empty error, `finished_at` and each row's fields (Grading field names,
    JSON-ready values; `pk` names the row) on the gradings still in `claimed_status` under
    `token`, in one UPDATE; return the pks it wrote.

    The rows travel as one JSON array parameter: QuerySet.bulk_update builds a CASE per
    field and row, an UPDATE per row costs a round trip each, and a VALUES list of a few
    hundred parameters costs more to bind than the heuristic grader takes to grade."""
    if not rows:
        return set()
    quote = connection.ops.quote_name
    fields = [Grading._meta.get_field(name) for name in rows[0] if name != "pk"]
    table = _table(Grading)
    data = json.dumps([{"vid": row["pk"], **{f.column: row[f.name] for f in fields}} for row in rows])
    sql = (f"UPDATE {table} SET {quote('status')} = %s, {quote('error')} = '', {quote('finished_at')} = %s, "
           + ", ".join(f"{quote(f.column)} = v.{quote(f.column)}" for f in fields)
           + f" FROM {_json_rows(fields)} WHERE {table}.{quote('id')} = v.vid"
           f" AND {table}.{quote('status')} = %s AND {table}.{quote('claim_token')} = %s"
           f" RETURNING {table}.{quote('id')}")
    with connection.cursor() as cursor:
        cursor.execute(sql, [status, finished_at, data, claimed_status, token])
        return {pk for (pk,) in cursor.fetchall()}


def _json_rows(fields) -> str:
    """SQL for a FROM item `v`: the rows of a JSON array parameter, with `vid` and `fields`."""
    quote = connection.ops.quote_name
    if connection.vendor == "postgresql":
        columns = ", ".join(f"{quote(f.column)} {f.cast_db_type(connection)}" for f in fields)
        return f"jsonb_to_recordset(%s::jsonb) AS v(vid bigint, {columns})"
    # SQLite: json_extract gives scalars as values and arrays or objects as JSON text.
    columns = ", ".join(f"json_extract(value, '$.{f.column}') AS {quote(f.column)}" for f in fields)
    return f"(SELECT json_extract(value, '$.vid') AS vid, {columns} FROM json_each(%s)) AS v"
