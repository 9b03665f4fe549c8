"""The exports panel of a batch: the list with progress, the launch forms, downloads.

Researchers only (`export_required`): exports carry the grader's rankings, which
blind review hides from annotators. One view serves the fragment the batch page
loads with htmx and a full page without JavaScript; the panel polls itself only
while an export is queued or running. While grading of the batch is under way the
advantages form says so and offers to export anyway (the launch refuses otherwise,
with the API's words). Files are served by a view that checks the role, never from
a static URL.
"""

import json

from django.contrib import messages
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe
from django.views.decorators.vary import vary_on_headers

from webapp.advantages.config import parse_advantage_config
from webapp.exports import selectors
from webapp.exports.forms import ExportForm
from webapp.exports.services import ACTIVE, ExportError, export_launch
from webapp.models import Batch, Export
from webapp.roles import export_required


@require_safe
@export_required
@vary_on_headers("HX-Request")
def exports_panel(request, pk):
    batch = get_object_or_404(Batch, pk=pk)
    return _panel(request, batch)


@require_POST
@export_required
def export_launch_view(request, pk):
    batch = get_object_or_404(Batch, pk=pk)
    kind = request.POST.get("kind")
    form = ExportForm(request.POST, kind=kind if kind in Export.Kind.values else Export.Kind.ADVANTAGES)
    if form.is_valid():
        try:
            export = export_launch(batch=batch, user=request.user, **form.cleaned_data)
        except ExportError as error:
            field, _, reason = str(error).partition(": ")
            form.add_error(field if field in form.fields else None, reason if field in form.fields else str(error))
    if form.errors:
        return _panel(request, batch, forms={form.initial["kind"]: form}, status=400)
    notice = f"Export #{export.pk} is {export.status}."
    if request.htmx:
        return _panel(request, batch, notice=notice)
    messages.success(request, notice)
    return redirect("exports_panel", batch.pk)


@require_safe
@export_required
def export_download(request, pk, name):
    export = get_object_or_404(Export, pk=pk)
    try:
        path = selectors.export_file(export, name)
    except LookupError as error:
        raise Http404(str(error)) from None
    return FileResponse(path.open("rb"), as_attachment=True, filename=f"export-{export.pk}-{name}")


def _panel(request, batch, *, forms=None, notice=None, status=200):
    exports = selectors.batch_exports(batch)
    config = parse_advantage_config(batch.advantage_config).as_dict()
    forms = {
        Export.Kind.ADVANTAGES: ExportForm(kind=Export.Kind.ADVANTAGES, initial={"config": json.dumps(config)}),
        Export.Kind.SFT: ExportForm(kind=Export.Kind.SFT, initial={"config": "{}"}),
        **(forms or {}),
    }
    context = {
        "batch": batch,
        "exports": [{"export": e, "config": json.dumps(e.config, indent=None), "warnings": selectors.export_warnings(e)}
                    for e in exports],
        "active": any(e.status in ACTIVE for e in exports),
        "grading_unfinished": selectors.unfinished_gradings(batch).count(),
        "advantages_form": forms[Export.Kind.ADVANTAGES],
        "sft_form": forms[Export.Kind.SFT],
        "notice": notice,
    }
    # htmx does not swap 4xx answers: errors go back as 200 so the form shows them.
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "exports/_panel.html", context)
    return render(request, "exports/page.html", context, status=status)
