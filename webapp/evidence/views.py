"""A group's execution evidence on a page of its own: the whole matrix, and with `?run=<key>`
one run's tests, the end of its log and the command that runs it again (the group page's
matrix links each cell here)."""

from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from webapp.evidence import selectors
from webapp.models import Group
from webapp.roles import reader_required


@require_safe
@reader_required
def evidence(request, pk):
    group = get_object_or_404(Group.objects.select_related("batch", "evidence"), pk=pk)
    panel = selectors.evidence_panel(group, whole=True)
    run = None
    if key := request.GET.get("run", ""):
        run = selectors.evidence_run(panel, key)
        if run is None:
            raise Http404("no such run in this group's evidence")
    return render(request, "evidence/evidence.html", {
        "group": group, "batch": group.batch, "evidence": panel, "run": run,
        "run_for": [selectors.named(tid) for tid in run.candidates] if run else [],
        "tests": sorted(run.outcome.tests.items()) if run else []})
