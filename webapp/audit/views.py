"""Auditing the grader: audit sets (list, create with a preview of the quotas, progress), the
auditor's page of one item (the group page with the audited grading and a verdict form), and
the gold set (mark a group, list a batch's gold groups, re-grade it), and the dashboard of
grader versions (webapp.audit.figures) with a CSV download of each of its tables, and a
set's report (webapp.audit.report): a printable page and its JSON download.

Auditors and researchers use these pages; everyone else gets 403, as does a reader from whom
the visibility rule (webapp.rankings.Viewer) hides rankings that the dashboard or a report is
over. Forms work without JavaScript; the auditor's page adds keys (static/js/audit.js).
"""

import csv

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from grading.audit_report import report_json
from webapp.audit import figures, selectors
from webapp.audit.charts import dashboard_charts
from webapp.audit.forms import FEATURE_LABELS, AuditSetForm, VerdictForm
from webapp.audit.report import SetReport, may_read_report, page_context, report_filename, set_report
from webapp.audit.sampling import SourceError, audit_plan, stratum_rows
from webapp.audit.services import AuditError, NotAllowed, audit_set_create, gold_mark, gold_unmark, verdict_save
from webapp.audit.tables import dashboard_tables
from webapp.grading.forms import LaunchForm
from webapp.grading.services import LaunchError, grading_launch
from webapp.grouppage import group_for_page, render_group_page
from webapp.models import AuditSet, AuditVerdict, Batch, GoldGroup, Group
from webapp.params import query_int
from webapp.rankings import RankingsHidden, Viewer
from webapp.roles import AUDIT_ROLES, role_required

audit_required = role_required(*AUDIT_ROLES)


@require_http_methods(["GET", "POST"])
@audit_required
def audit_sets(request):
    """The sets, and the form that makes one: "preview" shows the size and quotas, "create" stores it."""
    form = AuditSetForm(request.POST if request.method == "POST" else None)
    plan, status = None, 200
    if form.is_bound:
        if form.is_valid():
            data = form.cleaned_data
            try:
                plan = audit_plan(source=data["source"], stratify_by=data["stratify_by"], bins=data["bins"],
                                  seed=data["seed"], size=data["size"], half_width=data["half_width"],
                                  confidence=data["confidence"])
            except SourceError as error:
                form.add_error(None, str(error))
        if plan is not None and request.POST.get("action") == "create":
            try:
                audit_set = audit_set_create(name=form.cleaned_data["name"], plan=plan, user=request.user)
            except AuditError as error:
                form.add_error(None, str(error))
                plan = None
            else:
                messages.success(request, f"Audit set {audit_set.name} made: {audit_set.size} groups.")
                return redirect("audit_set", audit_set.pk)
        status = 200 if plan is not None else 400
    strata = stratum_rows([(s.label, s.low, s.high, s.population, s.quota) for s in plan.strata]) if plan else []
    return render(request, "audit/sets.html", {
        "form": form, "plan": plan, "strata": strata, "sets": selectors.audit_sets(), "feature_labels": FEATURE_LABELS,
    }, status=status)


@require_safe
@audit_required
def audit_set(request, pk):
    audit_set = get_object_or_404(AuditSet.objects.select_related("batch", "run", "created_by"), pk=pk)
    items = selectors.set_items(audit_set, request.user)
    return render(request, "audit/set.html", {
        "audit_set": audit_set, "items": items, "progress": selectors.set_progress(audit_set),
        "mine": sum(item.mine is not None for item in items), "feature_labels": FEATURE_LABELS,
        "next_item": selectors.next_item(audit_set, request.user),
        "may_read_report": may_read_report(audit_set, request.user),
        "strata": stratum_rows([(q["stratum"], q["low"], q["high"], q["population"], q["quota"])
                                for q in audit_set.design["quotas"]]),
    })


@require_safe
@audit_required
def audit_next(request, pk):
    """The next item of the set the user has not judged, after `after` (a position)."""
    audit_set = get_object_or_404(AuditSet, pk=pk)
    item = selectors.next_item(audit_set, request.user, after=query_int(request.GET.get("after")))
    if item is None:
        messages.success(request, f"You have judged every item of {audit_set.name}.")
        return redirect("audit_set", audit_set.pk)
    return redirect("audit_item", item.pk)


@require_safe
@audit_required
def audit_item(request, pk):
    return _item_page(request, selectors.item_for_page(pk))


@require_POST
@audit_required
def audit_verdict(request, pk):
    item = selectors.item_for_page(pk)
    form = VerdictForm(request.POST)
    if not form.is_valid():
        return _item_page(request, item, form=form, status=400)
    try:
        verdict_save(item=item, auditor=request.user, **form.cleaned_data)
    except NotAllowed as error:
        raise PermissionDenied(str(error)) from None
    except AuditError as error:
        form.add_error(None, str(error))
        return _item_page(request, item, form=form, status=400)
    messages.success(request, f"Verdict on item {item.position} saved: {form.cleaned_data['verdict']}.")
    return redirect(reverse("audit_next", args=[item.audit_set_id]) + f"?after={item.position}")


def _item_page(request, item, *, form=None, status=200):
    viewer = Viewer(request.user)
    group = group_for_page(item.group_id, request.user)
    mine = selectors.own_verdict(item, request.user)
    if form is None:
        initial = {"verdict": mine.verdict, "categories": mine.categories, "notes": mine.notes} if mine else None
        form = VerdictForm(initial=initial)
    audited = selectors.audited_ranking(item.grading)
    previous = selectors.previous_item(item)
    return render_group_page(request, group, status=status, template="audit/item.html", context={
        "item": item, "audit_set": item.audit_set, "form": form, "mine": mine, "audited": audited,
        "audited_rows": selectors.ranking_rows(audited),
        "others": [v for v in selectors.visible_verdicts(item, request.user) if v.auditor_id != request.user.pk],
        "corrected": selectors.corrected_ranking(item, request.user),
        "gold": selectors.gold_state(group), "verified": selectors.verified_ranking(group, viewer=viewer),
        "previous": previous, "ranking_next": request.path,
        "audit_next_url": reverse("audit_next", args=[item.audit_set_id]) + f"?after={item.position}",
        "category_labels": dict(AuditVerdict.Category.choices),
    })


# --- the report ------------------------------------------------------------------------


def _readable_report(request, pk) -> tuple[AuditSet, SetReport]:
    audit_set = get_object_or_404(AuditSet.objects.select_related("batch", "run", "created_by"), pk=pk)
    if not may_read_report(audit_set, request.user):
        raise PermissionDenied("the report shows every auditor's verdicts: judge every item of the set first")
    return audit_set, _shown(set_report, audit_set, viewer=Viewer(request.user))


def _shown(read, *args, **kwargs):
    """`read(*args, **kwargs)`: figures or a report over rankings; 403 saying why if some of
    them are hidden from the viewer it is given."""
    try:
        return read(*args, **kwargs)
    except RankingsHidden as error:
        raise PermissionDenied(str(error)) from None


@require_safe
@audit_required
def audit_report(request, pk):
    audit_set, report = _readable_report(request, pk)
    return render(request, "audit/report.html", page_context(audit_set, report))


@require_safe
@audit_required
def audit_report_json(request, pk):
    audit_set, report = _readable_report(request, pk)
    response = HttpResponse(report_json(report.data), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{report_filename(audit_set)}"'
    return response


# --- the gold set -----------------------------------------------------------------------


def _back(request, default: str) -> str:
    """The page to go back to: `next` when it is a path on this site, else `default`."""
    back = request.POST.get("next", "")
    on_site = back.startswith("/") and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()})
    return back if on_site else default


@require_POST
@audit_required
def gold_mark_view(request, pk):
    group = get_object_or_404(Group.objects.select_related("batch"), pk=pk)
    back = _back(request, reverse("gold_list", args=[group.batch_id]))
    try:
        gold = gold_mark(group=group, user=request.user)
    except NotAllowed as error:
        raise PermissionDenied(str(error)) from None
    except AuditError as error:
        return render(request, "audit/error.html", {"message": str(error), "back": back}, status=400)
    messages.success(request, f"{group.group_id} is gold: version {gold.annotation_version} verified.")
    return redirect(back)


@require_POST
@audit_required
def gold_unmark_view(request, pk):
    group = get_object_or_404(Group, pk=pk)
    if gold_unmark(group=group, user=request.user):
        messages.success(request, f"{group.group_id} is no longer gold.")
    return redirect(_back(request, reverse("gold_list", args=[group.batch_id])))


@require_safe
@audit_required
def gold_list(request, pk):
    batch = get_object_or_404(Batch, pk=pk)
    return render(request, "audit/gold.html", {"batch": batch, "gold": selectors.gold_groups(batch),
                                               "regrade_form": LaunchForm()})


# --- the dashboard, and re-grading the gold set ----------------------------------------------


def _dashboard_selection(request):
    """(batch or None, the selected versions, all the selection's versions) from the query:
    `batch` (a pk; empty: every batch) and `version` (repeated; none: every version).
    A batch or a version that does not exist is a 400 naming it."""
    raw = request.GET.get("batch", "")
    batch = None
    if raw:
        if not raw.isdigit() or not (batch := Batch.objects.filter(pk=int(raw)).first()):
            return None, f"batch: no batch {raw!r}"
    every = figures.grader_versions(batch)
    known = {v.version: v for v in every}
    asked = request.GET.getlist("version")
    unknown = [v for v in asked if v not in known]
    if unknown:
        return None, f"version: {unknown[0]!r} graded nothing in this selection"
    chosen = [v for v in every if v.version in set(asked)] if asked else every
    return (batch, chosen, every), ""


@require_safe
@audit_required
def dashboard(request):
    selection, error = _dashboard_selection(request)
    if selection is None:
        return render(request, "audit/error.html", {"message": error, "back": reverse("audit_dashboard")},
                      status=400)
    batch, chosen, every = selection
    figures_ = _shown(figures.dashboard, batch, chosen, all_versions=every, viewer=Viewer(request.user))
    tables = dashboard_tables(figures_)
    charts = dashboard_charts(figures_)
    query = request.GET.urlencode()
    return render(request, "audit/dashboard.html", {
        "batch": batch, "batches": Batch.objects.order_by("name").only("pk", "name"), "versions": every,
        "chosen": {v.version for v in chosen}, "figures": figures_, "query": query,
        "sections": [(tables[name], charts[name]) for name in tables],
        "regrade_form": LaunchForm() if batch is not None else None,
    })


@require_safe
@audit_required
def dashboard_progress(request):
    """The dashboard's note on figures a worker is computing, which polls this while any is
    (htmx): the note again, or once they are all ready, an empty answer that has htmx reload
    the page to show them."""
    selection, error = _dashboard_selection(request)
    if selection is None:
        return HttpResponseBadRequest(error, content_type="text/plain; charset=utf-8")
    batch, chosen, every = selection
    progress = _shown(figures.progress, batch, chosen, all_versions=every, viewer=Viewer(request.user))
    if not progress.pending:
        response = HttpResponse("")
        response["HX-Refresh"] = "true"
        return response
    return render(request, "audit/_progress.html", {"progress": progress, "query": request.GET.urlencode()})


@require_safe
@audit_required
def dashboard_csv(request, table):
    selection, error = _dashboard_selection(request)
    if selection is None:
        return HttpResponseBadRequest(error, content_type="text/plain; charset=utf-8")
    batch, chosen, every = selection
    tables = dashboard_tables(_shown(figures.dashboard, batch, chosen, all_versions=every,
                                     viewer=Viewer(request.user)))
    if table not in tables:
        raise Http404(f"no table {table!r}")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{table}.csv"'
    writer = csv.writer(response)
    writer.writerow(tables[table].header)
    writer.writerows(tables[table].rows)
    return response


@require_POST
@audit_required
def gold_regrade(request, pk):
    """Grade the batch's gold groups again with a grader profile; progress shows on the grading panel."""
    batch = get_object_or_404(Batch, pk=pk)
    form = LaunchForm(request.POST)
    back = reverse("gold_list", args=[batch.pk])
    if not form.is_valid():
        return render(request, "audit/error.html", {"message": f"grader: {form.errors.as_text()}", "back": back},
                      status=400)
    gold = list(GoldGroup.objects.filter(group__batch=batch).values_list("group_id", flat=True))
    if not gold:
        return render(request, "audit/error.html", {"message": "this batch has no gold group to re-grade",
                                                    "back": back}, status=400)
    try:
        launch = grading_launch(batch=batch, grader=form.cleaned_data["grader"], user=request.user, regrade=True,
                                groups=gold)
    except LaunchError as error:
        return render(request, "audit/error.html", {"message": str(error), "back": back}, status=400)
    if launch.run is None:
        messages.success(request, f"Nothing to grade: the {len(gold)} gold groups are already being graded "
                                  f"by {form.cleaned_data['grader']}.")
    else:
        messages.success(request, f"Re-grading {launch.queued} gold groups with {launch.run.grader} (run "
                                  f"#{launch.run.pk}); its version joins the drift chart when it is done.")
    return redirect("grading_panel", batch.pk)
