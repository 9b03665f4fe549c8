#!/usr/bin/env bash
# `make demo`: the embedded default in one command. SQLite and a filesystem broker
# under GAGAR_DATA_DIR (default ./var, the same instance the README's commands act on),
# a Celery worker in the background, the web app in front; grades the sample with the
# heuristic grader, prints its advantages, exports them (Parquet and a manifest, under
# GAGAR_DATA_DIR) and serves http://127.0.0.1:8000 (demo / gagar-demo). Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
export DEBUG=${DEBUG:-1}
export DB_CONN_MAX_AGE=${DB_CONN_MAX_AGE:-60}
PORT=${PORT:-8000}

"$PY" manage.py migrate --noinput
DATA_DIR=$("$PY" manage.py shell -v 0 -c 'from django.conf import settings; print(settings.DATA_DIR)')
"$PY" manage.py add_user demo --role researcher --password gagar-demo --superuser --if-missing
"$PY" manage.py import_rollouts sample/rollouts.jsonl --batch sample --append  # a second demo imports nothing new

source scripts/evidence_demo.sh  # the sandbox and the codebase store, before the worker starts

# The worker runs in the background with the periodic sweep (-B); the trap stops it
# however this script ends: Ctrl-C, kill, or an error.
"$PY" -m celery -A workers worker -Q cpu,gpu,derived --concurrency 2 -B -l warning &
WORKER=$!
stop_worker() {
    trap - EXIT INT TERM
    if kill -0 "$WORKER" 2>/dev/null; then
        echo "stopping the worker (pid $WORKER)"
        kill -TERM "$WORKER" 2>/dev/null || true
        wait "$WORKER" 2>/dev/null || true
    fi
}
trap stop_worker EXIT
trap 'stop_worker; exit 130' INT TERM

"$PY" manage.py grade --batch sample --grader heuristic --wait --timeout 120 \
    || echo "grading did not finish cleanly; the batch page shows why"
"$PY" manage.py advantages --batch sample --format table
evidence_demo "$PY"
"$PY" manage.py export advantages --batch sample --format parquet --out "$DATA_DIR/sample-advantages.parquet" --force
echo "Data in $DATA_DIR: the README's manage.py commands act on this instance."
echo "Open http://127.0.0.1:$PORT and log in as demo / gagar-demo (Ctrl-C stops the web app and the worker)"
"$PY" manage.py runserver "127.0.0.1:$PORT"
