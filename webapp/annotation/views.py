"""Ranking a group (save, live advantage preview, history with diffs, revert/accept),
the annotation queue of a batch with its leases, and the batch page's annotation panel.

Saving is a plain POST form (it works without JavaScript): 302 back to the
group page when stored; 400 with the page, the message and the ranking as
sent when the input is not a ranking of the group; 409 with the newer
ranking beside the user's when the chain moved on; 403 for a role that may
not annotate (and Django's 403 for a bad CSRF token).
"""

import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST, require_safe
from django.views.decorators.vary import vary_on_headers

from grading.rankings import tier_lines
from webapp.advantages.config import parse_advantage_config
from webapp.advantages.selectors import ranking_advantage_rows
from webapp.annotation import editor
from webapp.annotation.forms import PolicyForm, RankingInput, RevertForm
from webapp.annotation.panel import RankingPage, preview_ranking
from webapp.annotation.selectors import batch_review, held_lease, queue_groups
from webapp.annotation.services import (
    AnnotationError,
    Conflict,
    InvalidAnnotation,
    NotAllowed,
    lease_next_group,
    lease_release,
    ranking_revert,
    ranking_save,
    sft_unexportable,
)
from webapp.grouppage import group_for_page, render_group_page
from webapp.models import Annotation, AnnotationPolicy, Batch, Group, Trajectory
from webapp.rankings import Viewer, visible_history
from webapp.roles import RESEARCHER, annotator_required, has_role, may_annotate, reader_required, role_required

WAITING_LIMIT = 1000  # "1000+": counting a huge queue exactly is a scan


def _trajectories(group):
    return list(Trajectory.objects.filter(group=group).defer("patch").order_by("id"))


@require_POST
@annotator_required
def ranking_save_view(request, pk):
    group = group_for_page(pk, request.user)
    try:
        data = RankingInput.from_post(request.POST, _trajectories(group))
    except InvalidAnnotation as error:
        return render_group_page(request, group, error=str(error), status=400)
    try:
        annotation = ranking_save(
            group=group, user=request.user, tiers=data.tiers, flags=data.flags, rationales=data.rationales,
            group_rationale=data.group_rationale, based_on_version=data.based_on_version,
            grading_id=data.grading_id, verdicts=data.verdicts)
    except Conflict as conflict:
        return _conflict(request, group, data, conflict)
    except NotAllowed as error:
        raise PermissionDenied(str(error)) from None
    except AnnotationError as error:
        return render_group_page(request, group, submitted=data, error=str(error), status=400)
    messages.success(request, f"Saved version {annotation.version}.")
    missing = sft_unexportable(annotation)
    if missing:
        messages.warning(request, f"The grader-SFT export will leave this group out: no rationale for "
                                  f"{', '.join(missing)}. Write one under ✎ for every ranked trajectory.")
    back = request.POST.get("next", "")  # the page the editor was on, when not the group page (the auditor's)
    if back.startswith("/") and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        return redirect(back)
    return redirect(reverse("group", args=[group.pk]) + "#ranking")


def _conflict(request, group, data: RankingInput, conflict: Conflict):
    newer = conflict.newer
    theirs = newer.tiers if newer is not None else None
    return render(request, "annotation/conflict.html", {
        "group": group, "batch": group.batch, "message": str(conflict), "newer": newer, "mine": data,
        "mine_lines": tier_lines(data.tiers), "theirs_lines": tier_lines(theirs),
        "moves": editor.diff_rows(theirs, data.tiers), "trajectories": _trajectories(group),
        "new_base": newer.version if newer is not None else 0,
        "mine_json": json.dumps([list(tier) for tier in data.tiers]),
    }, status=409)


@require_POST
@annotator_required
def ranking_preview(request, pk):
    """Advantages under the ranking being edited, by the same code as the final ones."""
    group = get_object_or_404(Group.objects.select_related("batch"), pk=pk)
    trajectories = _trajectories(group)
    try:
        data = RankingInput.from_post(request.POST, trajectories)
    except InvalidAnnotation as error:
        data, ranking, problem = None, None, str(error)
    else:
        ranking, problem = preview_ranking(data.tiers, data.flags, data.verdicts, trajectories)
    preview = editor.preview(ranking_advantage_rows(group, ranking, trajectories), data.tiers if data else (),
                           problem=problem)
    context = {"group": group, "batch": group.batch, "preview": preview,
               "config": parse_advantage_config(group.batch.advantage_config)}
    if request.htmx:
        return render(request, "annotation/_ranking_preview.html", context)
    return render(request, "annotation/preview.html", context, status=400 if data is None else 200)


@require_safe
@reader_required
def ranking_history(request, pk):
    group = group_for_page(pk, request.user)
    page = RankingPage.load(request.user, group, [])
    versions = visible_history(Viewer(request.user), group, ranked=group.my_version is not None)
    final_row = page.final_head
    grader = page.grader
    for v in versions:
        v.lines = tier_lines(v.tiers)
        v.tau = editor.tau(v.tiers, grader.tiers) if grader is not None else None
    tiers = {v.version: v.tiers for v in versions if v.tiers}
    labels = {v.version: f"v{v.version} · {v.user.get_username()}" for v in versions if v.tiers}
    if grader is not None:
        tiers[0], labels[0] = grader.tiers, "grader"
    a, b = _pair(request.GET, tiers)
    return render(request, "annotation/history.html", {
        "group": group, "batch": group.batch, "versions": versions, "grader": grader, "page": page,
        "grader_lines": tier_lines(grader.tiers) if grader else [],
        "choices": sorted(labels.items(), reverse=True), "a": a, "b": b,
        "a_label": labels.get(a), "b_label": labels.get(b),
        "moves": editor.diff_rows(tiers[a], tiers[b]) if a is not None else [],
        "final_version": final_row.version if final_row else 0,
        "final_is_human": final_row is not None and final_row.tiers is not None,
        "can_revert": has_role(request.user, RESEARCHER),
    })


def _pair(query, choices):
    """The two versions to compare: from the query, else the two latest."""
    def pick(name):
        try:
            value = int(query.get(name, ""))
        except ValueError:
            return None
        return value if value in choices else None

    a, b = pick("a"), pick("b")
    if a is None or b is None:
        latest = sorted(choices, reverse=True)[:2]
        if len(latest) < 2:
            return None, None
        b, a = latest
    return a, b


@require_POST
@role_required(RESEARCHER)
def ranking_revert_view(request, pk):
    group = get_object_or_404(Group.objects.select_related("batch"), pk=pk)
    form = RevertForm(request.POST)
    if not form.is_valid():
        return _history_error(request, group, f"invalid revert: {form.errors.as_text()}", 400)
    try:
        annotation = ranking_revert(group=group, user=request.user, **form.cleaned_data)
    except Conflict as conflict:
        return _history_error(request, group, str(conflict), 409)
    except InvalidAnnotation as error:
        return _history_error(request, group, str(error), 400)
    what = "the grader's ranking" if annotation.reverted_to == 0 else f"version {annotation.reverted_to}"
    messages.success(request, f"Version {annotation.version} makes {what} the final ranking.")
    return redirect("ranking_history", group.pk)


def _history_error(request, group, message, status):
    return render(request, "annotation/error.html", {
        "group": group, "batch": group.batch, "message": message,
        "back": reverse("ranking_history", args=[group.pk])}, status=status)


# --- the queue and the batch page's panel ----------------------------------------------


def _batch(pk):
    return get_object_or_404(Batch.objects.select_related("annotation_policy"), pk=pk)


@require_safe
@annotator_required
def annotation_queue(request, pk):
    batch = _batch(pk)
    policy = AnnotationPolicy.of(batch)
    waiting = queue_groups(user=request.user, batch=batch, policy=policy)[:WAITING_LIMIT + 1].count()
    mine = (Annotation.objects.filter(group__batch=batch, user=request.user, kind=Annotation.Kind.RANKING)
            .order_by("-version").values_list("group_id", "group__group_id", "created_at"))
    recent, seen = [], set()
    for group_pk, group_id, created_at in mine:
        if group_pk not in seen:
            seen.add(group_pk)
            recent.append((group_pk, group_id, created_at))
    return render(request, "annotation/queue.html", {
        "batch": batch, "policy": policy, "criteria": _criteria_labels(policy),
        "held": held_lease(user=request.user, batch=batch),
        "waiting": min(waiting, WAITING_LIMIT), "waiting_more": waiting > WAITING_LIMIT,
        "ranked": len(recent), "recent": recent[:10],
    })


def _criteria_labels(policy):
    labels = dict(AnnotationPolicy.Criterion.choices)
    return [labels[c] for c in policy.criteria if c in labels]


@require_POST
@annotator_required
def queue_next(request, pk):
    """Lease the next group to the user and open it; `skip` gives a held group back first."""
    batch = _batch(pk)
    skip = []
    if request.POST.get("skip", "").isdigit():
        skipped = Group.objects.filter(batch=batch, pk=int(request.POST["skip"])).first()
        if skipped is not None:
            lease_release(group=skipped, user=request.user)
            skip.append(skipped.pk)
    assignment = lease_next_group(user=request.user, batch=batch, skip=skip)
    if assignment is None:
        messages.info(request, "Nothing left for you in this queue.")
        return redirect("annotation_queue", batch.pk)
    until = timezone.localtime(assignment.lease.expires_at).strftime("%H:%M")
    messages.info(request, f"{'Still yours' if assignment.resumed else 'Yours'} until {until} UTC: "
                           f"rank it, or skip it to give it back.")
    return redirect(reverse("group", args=[assignment.group.pk]) + "#ranking")


@require_POST
@annotator_required
def lease_release_view(request, pk):
    group = get_object_or_404(Group, pk=pk)
    if lease_release(group=group, user=request.user):
        messages.info(request, f"Gave {group.group_id} back to the queue.")
    return redirect("annotation_queue", group.batch_id)


@require_safe
@reader_required
@vary_on_headers("HX-Request")
def annotation_panel(request, pk):
    return _panel(request, _batch(pk))


@require_POST
@role_required(RESEARCHER)
def annotation_policy(request, pk):
    batch = _batch(pk)
    form = PolicyForm(request.POST, instance=AnnotationPolicy.of(batch))
    if not form.is_valid():
        return _panel(request, batch, form=form, status=400)
    policy = form.save(commit=False)
    policy.updated_by = request.user
    policy.save()
    batch.annotation_policy = policy
    if request.htmx:
        return _panel(request, batch, notice="Annotation policy saved.")
    messages.success(request, "Annotation policy saved.")
    return redirect("annotation_panel", batch.pk)


def _panel(request, batch, *, form=None, notice="", status=200):
    policy = AnnotationPolicy.of(batch)
    context = {
        "batch": batch, "policy": policy, "criteria": _criteria_labels(policy),
        "review": batch_review(batch, viewer=Viewer(request.user)),
        "form": form or PolicyForm(instance=policy), "can_write": has_role(request.user, RESEARCHER),
        "can_annotate": may_annotate(request.user), "notice": notice,
    }
    # htmx does not swap 4xx answers: a refused form goes back as 200 so it shows its errors
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "annotation/_panel.html", context)
    return render(request, "annotation/panel.html", context, status=status)
