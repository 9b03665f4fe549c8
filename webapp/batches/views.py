"""The batches page and one batch's table of groups."""

from django.contrib import messages
from django.http import QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST, require_safe
from django.views.decorators.vary import vary_on_headers

from webapp.batches import selectors
from webapp.batches.forms import SORT_LABELS, GroupFilterForm, ImportForm
from webapp.batches.uploads import (
    ImportFailed,
    UploadTooLarge,
    batch_import_uploaded,
    import_summary,
    in_the_forms_words,
    limit_upload,
)
from webapp.models import Batch
from webapp.rankings import Viewer
from webapp.roles import RESEARCHER, has_role, may_annotate, may_export, reader_required, role_required
from webapp.triage import COLUMNS, REVIEW_STATES, visible_triage


def _query(params: dict, **extra) -> str:
    qd = QueryDict(mutable=True)
    qd.update({**params, **{k: v for k, v in extra.items() if v}})
    return qd.urlencode()


@require_safe
@reader_required
def index(request):
    return _index(request, ImportForm() if has_role(request.user, RESEARCHER) else None)


def _index(request, import_form, import_errors=(), status=200):
    # a refused import comes back at the top of the page, not below however many batches
    refused = bool(import_errors) or (import_form is not None and bool(import_form.errors))
    return render(request, "batches/index.html", {
        "batches": selectors.batches_overview(), "import_form": import_form, "import_errors": import_errors,
        "import_first": refused,
    }, status=status)


@csrf_exempt  # checked by _import_files, once the upload limit is in place (Django's documented way)
@require_POST
@role_required(RESEARCHER)
def import_files(request):
    """Import posted files into a batch, whole or not at all; the summary (with what was
    skipped) shows on the batches page, or the errors as `file:line: field: reason`. A form
    over the upload limit is refused before it is read."""
    limit_upload(request)
    try:
        return _import_files(request)
    except UploadTooLarge as error:
        return _index(request, ImportForm(), [str(error)], status=413)


@csrf_protect
def _import_files(request):
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _index(request, form, status=400)
    data = form.cleaned_data
    try:
        result = batch_import_uploaded(
            uploads={role: data[role] for role in ("paths", "reports", "tasks")}, file_format=data["file_format"],
            batch_name=data["name"], user=request.user, append=data["append"])
    except ImportFailed as failure:
        labels = {name: str(field.label) for name, field in form.fields.items()}
        return _index(request, form, in_the_forms_words(failure.errors, labels), status=400)
    for line in import_summary(result):
        messages.success(request, line)
    return redirect("index")


@require_safe
@reader_required
@vary_on_headers("HX-Request")
def batch(request, pk):
    batch = get_object_or_404(Batch.objects.select_related("created_by", "annotation_policy"), pk=pk)
    viewer = Viewer(request.user)
    form = GroupFilterForm(request.GET, columns=visible_triage(batch, viewer=viewer).columns)
    flt = form.to_filter()
    page = selectors.group_page(batch, flt, viewer=viewer, after=request.GET.get("after", ""),
                                before=request.GET.get("before", ""))
    params = flt.params()
    sort_column = selectors.SORTS[flt.sort][0]
    context = {
        "batch": batch,
        "form": form,
        "flt": flt,
        "page": page,
        "filter_query": _query(params),
        "next_query": _query(params, after=page.next_cursor) if page.next_cursor else None,
        "prev_query": _query(params, before=page.prev_cursor) if page.prev_cursor else None,
        "sort_links": {name: _query({**params, "sort": f"-{name}" if flt.sort == name else name})
                       for name in ("group", "pass_rate", "confidence", "agreement", "lines")},
        "sort_column": sort_column,
        "nulls_last": sort_column in selectors.NULLABLE,
        "columns": page.columns,
        "some_hidden": page.columns != COLUMNS,
        "review_states": REVIEW_STATES,
        "sort_label": SORT_LABELS[flt.sort],
        "can_annotate": may_annotate(request.user),
        "can_export": may_export(request.user),
    }
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "batches/_groups.html", context)
    context["label_counts"] = selectors.label_counts([batch])[batch.pk]
    context["evidence_absent"] = selectors.evidence_absent(batch)
    return render(request, "batches/batch.html", context)
