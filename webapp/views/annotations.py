"""Ranking a group: save, live advantage preview, history with diffs, revert/accept.

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
from django.views.decorators.http import require_GET, require_POST

from webapp import selectors
from webapp.models import Annotation, Group, Trajectory
from webapp.review import ranking as view
from webapp.review.annotation import RankingPage, preview_ranking
from webapp.roles import ANNOTATOR, RESEARCHER, has_role, role_required
from webapp.services.advantages import AdvantageConfig, ranking_advantage_rows
from webapp.services.annotations import (
    AnnotationError,
    Conflict,
    InvalidAnnotation,
    NotAllowed,
    ranking_revert,
    ranking_save,
)
from webapp.views.access import reader_required
from webapp.views.annotation_forms import RankingInput, RevertForm
from webapp.views.groups import render_group_page

annotator_required = role_required(RESEARCHER, ANNOTATOR)


def _passing(group):
    return list(Trajectory.objects.filter(group=group, passed=True).defer("patch").order_by("id"))


@require_POST
@annotator_required
def ranking_save_view(request, pk):
    group = selectors.group_for_page(pk, request.user)
    try:
        data = RankingInput.from_post(request.POST, _passing(group))
    except InvalidAnnotation as error:
        return render_group_page(request, group, error=str(error), status=400)
    try:
        annotation = ranking_save(
            group=group, user=request.user, tiers=data.tiers, flags=data.flags, rationales=data.rationales,
            group_rationale=data.group_rationale, based_on_version=data.based_on_version,
            grading_id=data.grading_id)
    except Conflict as conflict:
        return _conflict(request, group, data, conflict)
    except NotAllowed as error:
        raise PermissionDenied(str(error)) from None
    except AnnotationError as error:
        return render_group_page(request, group, submitted=data, error=str(error), status=400)
    messages.success(request, f"Saved version {annotation.version}.")
    return redirect(reverse("group", args=[group.pk]) + "#ranking")


def _conflict(request, group, data: RankingInput, conflict: Conflict):
    newer = conflict.newer
    theirs = newer.tiers if newer is not None else None
    return render(request, "annotations/conflict.html", {
        "group": group, "batch": group.batch, "message": str(conflict), "newer": newer, "mine": data,
        "mine_lines": view.tier_lines(data.tiers), "theirs_lines": view.tier_lines(theirs),
        "moves": view.diff_rows(theirs, data.tiers), "passing": _passing(group),
        "new_base": newer.version if newer is not None else 0,
        "mine_json": json.dumps([list(tier) for tier in data.tiers]),
    }, status=409)


@require_POST
@annotator_required
def ranking_preview(request, pk):
    """Advantages under the ranking being edited, by the same code as the final ones."""
    group = get_object_or_404(Group.objects.select_related("batch"), pk=pk)
    trajectories = list(Trajectory.objects.filter(group=group).defer("patch").order_by("id"))
    passing = [t for t in trajectories if t.passed]
    try:
        data = RankingInput.from_post(request.POST, passing)
    except InvalidAnnotation as error:
        data, ranking, problem = None, None, str(error)
    else:
        ranking, problem = preview_ranking(data.tiers, data.flags, [t.trajectory_id for t in passing])
    preview = view.preview(ranking_advantage_rows(group, ranking, trajectories), data.tiers if data else (),
                           problem=problem)
    context = {"group": group, "batch": group.batch, "preview": preview,
               "config": AdvantageConfig.from_dict(group.batch.advantage_config)}
    if request.htmx:
        return render(request, "groups/_ranking_preview.html", context)
    return render(request, "annotations/preview.html", context, status=400 if data is None else 200)


@require_GET
@reader_required
def ranking_history(request, pk):
    group = selectors.group_for_page(pk, request.user)
    page = RankingPage.load(request.user, group, [])
    versions = list(Annotation.objects.filter(group=group).select_related("user").order_by("-version"))
    final_row = next((v for v in versions if not v.independent), None)
    if page.seen.hide_others:
        versions = [v for v in versions if v.user_id == request.user.pk]
    grader = page.grader
    for v in versions:
        v.lines = view.tier_lines(v.tiers)
        v.tau = view.tau(v.tiers, grader.tiers) if grader is not None else None
    tiers = {v.version: v.tiers for v in versions if v.tiers}
    labels = {v.version: f"v{v.version} · {v.user.get_username()}" for v in versions if v.tiers}
    if grader is not None:
        tiers[0], labels[0] = grader.tiers, "grader"
    a, b = _pair(request.GET, tiers)
    return render(request, "annotations/history.html", {
        "group": group, "batch": group.batch, "versions": versions, "grader": grader, "page": page,
        "grader_lines": view.tier_lines(grader.tiers) if grader else [],
        "choices": sorted(labels.items(), reverse=True), "a": a, "b": b,
        "a_label": labels.get(a), "b_label": labels.get(b),
        "moves": view.diff_rows(tiers[a], tiers[b]) if a is not None else [],
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
    return render(request, "annotations/error.html", {
        "group": group, "batch": group.batch, "message": message,
        "back": reverse("ranking_history", args=[group.pk])}, status=status)
