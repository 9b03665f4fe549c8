"""The batches page and one batch's table of groups."""

from django.http import QueryDict
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from webapp.batches import selectors
from webapp.batches.forms import SORT_LABELS, GroupFilterForm
from webapp.models import Batch
from webapp.roles import may_annotate, may_export, reader_required


def _query(params: dict, **extra) -> str:
    qd = QueryDict(mutable=True)
    qd.update({**params, **{k: v for k, v in extra.items() if v}})
    return qd.urlencode()


@require_GET
@reader_required
def index(request):
    return render(request, "batches/index.html", {"batches": selectors.batches_overview()})


@require_GET
@reader_required
@vary_on_headers("HX-Request")
def batch(request, pk):
    batch = get_object_or_404(Batch.objects.select_related("created_by"), pk=pk)
    form = GroupFilterForm(request.GET)
    flt = form.to_filter()
    page = selectors.group_page(batch, flt, after=request.GET.get("after", ""),
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
        "sort_links": {
            "group": _query({**params, "sort": "-group" if flt.sort == "group" else "group"}),
            "pass_rate": _query({**params, "sort": "-pass_rate" if flt.sort == "pass_rate" else "pass_rate"}),
        },
        "sort_column": sort_column,
        "sort_label": SORT_LABELS[flt.sort],
        "can_annotate": may_annotate(request.user),
        "can_export": may_export(request.user),
    }
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "batches/_groups.html", context)
    context["label_counts"] = selectors.label_counts([batch])[batch.pk]
    return render(request, "batches/batch.html", context)
