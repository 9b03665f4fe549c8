# The demo's execution evidence, sourced by scripts/demo.sh: Debian's bubblewrap (the sandbox)
# and python3-pytest (the sample tasks' interpreter) installed when missing, the instance's codebase
# store set to sample/ (its snapshot `codebase`) before the worker starts; then `evidence_demo` imports
# the evidence sample (sample/evidence.jsonl), grades it, the worker running each group's
# candidates in the sandbox first, and prints what the evidence caught.
bash scripts/sandbox.sh >/dev/null
if ! /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq python3-pytest >/dev/null
fi
# The codebase store is the instance's (GAGAR_DATA_DIR/instance.env), not this shell's: the worker,
# the web app and the README's commands run from any shell all read it.
if ! grep -qs '^GAGAR_CODEBASES=' "$DATA_DIR/instance.env"; then
    echo "GAGAR_CODEBASES=$PWD/sample" >> "$DATA_DIR/instance.env"
fi

evidence_demo() {
    local py=$1
    "$py" manage.py import_rollouts sample/evidence.jsonl --batch sample-evidence --append
    "$py" manage.py grade --batch sample-evidence --grader heuristic --wait --timeout 300 \
        || echo "grading the evidence sample did not finish cleanly; the batch page shows why"
    "$py" manage.py shell -v 0 -c '
from webapp.models import Grading, GroupEvidence
for e in GroupEvidence.objects.filter(group__batch__name="sample-evidence").order_by("group__group_id"):
    print(e.group.group_id, "evidence", e.status, e.reason)
    for tid, cells in sorted(e.breaks.items()):
        print("  ", tid, "breaks tests the others pass:", "; ".join(s + ": " + t for s, t in cells))
    for tid, why in sorted(e.flaky.items()):
        print("  ", tid, why)
    grading = Grading.objects.filter(group=e.group, status="done").order_by("-finished_at").first()
    if grading:
        print("   heuristic ranking:", grading.tiers)'
}
