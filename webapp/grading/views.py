"""The grading panel of a batch: progress, failures, launch, retry, cancel, redistribution config.

One view serves both the fragment the batch page loads with htmx and a full
page for a browser without JavaScript. The panel polls itself only while
something is queued or running. Writes are for researchers; POSTs answer an
htmx request with the fresh panel and anything else with a redirect.
"""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe
from django.views.decorators.vary import vary_on_headers

from grading.graders import heuristic
from grading.rankings import tier_lines
from webapp.advantages.config import DEFAULT_FLAG_NAMES, parse_advantage_config
from webapp.advantages.services import advantage_config_update
from webapp.cases import group_cases
from webapp.grading import selectors
from webapp.grading.forms import AdvantageConfigForm, CancelForm, LaunchForm
from webapp.grading.services import LaunchError, grading_launch, grading_run_cancel, gradings_retry_failed
from webapp.models import Batch, Grading, GradingRun, GradingTranscript
from webapp.rankings import Viewer, visible_ranking
from webapp.roles import RESEARCHER, has_role, reader_required, role_required

CHART_WIDTH, CHART_HEIGHT = 320, 64


@require_safe
@reader_required
@vary_on_headers("HX-Request")
def grading_panel(request, pk):
    batch = get_object_or_404(Batch, pk=pk)
    return _panel(request, batch)


@require_POST
@role_required(RESEARCHER)
def grading_launch_view(request, pk):
    batch = get_object_or_404(Batch, pk=pk)
    form = LaunchForm(request.POST)
    if not form.is_valid():
        return _panel(request, batch, launch_form=form, status=400)
    try:
        launch = grading_launch(
            batch=batch, grader=form.cleaned_data["grader"], user=request.user, regrade=form.cleaned_data["regrade"]
        )
    except LaunchError as error:
        form.add_error(None, str(error))
        return _panel(request, batch, launch_form=form, status=400)
    if launch.active_run:
        run = launch.active_run
        notice = (f"Nothing to grade: run #{run.pk} ({run.grader}) is already grading these groups "
                  f"({selectors.in_progress(run)} queued or running).")
    elif launch.run is None:
        notice = f"Nothing to grade: {launch.skipped} mixed groups are already graded."
    else:
        notice = f"Queued {launch.queued} groups for {launch.run.grader}" + _unsent(launch)
        if launch.evidence_off:
            notice += f" Note: {launch.evidence_off}."
    return _done(request, batch, notice)


@require_POST
@role_required(RESEARCHER)
def grading_retry_view(request, pk):
    batch = get_object_or_404(Batch, pk=pk)
    retry = gradings_retry_failed(batch=batch)
    if not retry.queued:
        return _done(request, batch, "No failed gradings to retry.")
    return _done(request, batch, f"Queued {retry.queued} failed gradings again" + _unsent(retry))


@require_POST
@role_required(RESEARCHER)
def grading_cancel_view(request, pk):
    """Cancel one run of the batch, named by the form's `run`."""
    batch = get_object_or_404(Batch, pk=pk)
    form = CancelForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest(f"run: {form.errors['run'][0]}", content_type="text/plain; charset=utf-8")
    run = get_object_or_404(GradingRun, batch=batch, pk=form.cleaned_data["run"])
    if run.cancelled_at is not None:
        return _done(request, batch, f"Run #{run.pk} was already cancelled.")
    cancelled = grading_run_cancel(run=run, user=request.user)
    running = selectors.in_progress(run)
    notice = f"Cancelled run #{run.pk}: {cancelled} queued grading{'s' if cancelled != 1 else ''} will not be graded"
    return _done(request, batch, notice + (f"; {running} running finish first." if running else "."))


def _unsent(launch) -> str:
    """The end of a notice of queued gradings: whether their messages went out."""
    if launch.broker_error:
        return f", but {launch.broker_error}: they are sent as soon as it is back."
    return "."


@require_POST
@role_required(RESEARCHER)
def advantage_config_view(request, pk):
    batch = get_object_or_404(Batch, pk=pk)
    form = AdvantageConfigForm(request.POST)
    if not form.is_valid():
        return _panel(request, batch, config_form=form, status=400)
    advantage_config_update(batch=batch, config=form.cleaned_data["config"])
    return _done(request, batch, "Redistribution config saved.")


def _done(request, batch, notice):
    if request.htmx:
        return _panel(request, batch, notice=notice)
    messages.success(request, notice)
    return redirect("grading_panel", batch.pk)


def _panel(request, batch, *, launch_form=None, config_form=None, notice=None, status=200):
    viewer = Viewer(request.user)
    runs = selectors.batch_grading_status(batch, viewer=viewer)
    active = any(r.active for r in runs)
    config = parse_advantage_config(batch.advantage_config)
    figures = selectors.panel_figures(batch, viewer=viewer)  # stored by a worker, never computed here
    context = {
        "batch": batch,
        "runs": runs,
        "active": active,
        **selectors.graded_share(batch),
        "any_failed": any(r.counts[Grading.Status.FAILED] for r in runs),
        "can_write": has_role(request.user, RESEARCHER),
        "launch_form": launch_form or LaunchForm(),
        "config_form": config_form or AdvantageConfigForm.for_config(config),
        "config": config,
        "default_flags": DEFAULT_FLAG_NAMES,
        "hidden": figures.hidden,
        "figures": figures,
        "charts": None if figures.histogram is None else _charts(figures.histogram),
        "flagged": figures.flagged,
        "notice": notice,
    }
    # htmx does not swap 4xx answers: errors go back as 200 so the form shows them.
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "grading/_panel.html", context)
    return render(request, "grading/page.html", context, status=status)


def _charts(histogram):
    """Bars for the two histograms, in SVG user units, on one shared y scale."""
    if not histogram.n:
        return None
    top = max(max(histogram.before), max(histogram.after), 1)
    width = CHART_WIDTH / len(histogram.before)

    def bars(counts):
        out = []
        for i, count in enumerate(counts):
            height = CHART_HEIGHT * count / top
            out.append({"x": round(i * width + 0.5, 2), "w": round(max(width - 1, 0.5), 2),
                        "y": round(CHART_HEIGHT - height, 2), "h": round(height, 2), "count": count,
                        "low": histogram.edges[i], "high": histogram.edges[i + 1]})
        return out

    zero = None
    low, high = histogram.edges[0], histogram.edges[-1]
    if low < 0 < high:
        zero = round(CHART_WIDTH * (0 - low) / (high - low), 2)
    return {"width": CHART_WIDTH, "height": CHART_HEIGHT, "low": low, "high": high, "zero": zero,
            "n": histogram.n, "series": [("GRPO (before)", "before", bars(histogram.before)),
                                         ("Redistributed (after)", "after", bars(histogram.after))]}


@require_safe
@reader_required
def grading_detail(request, pk):
    """One grading of a group: who graded it, what it cost, its ranking with each trajectory's
    score, flags and reasons (for the heuristic grader every term of its penalty), and the
    grader's conversation (its tool calls and what they returned). Hidden from a blind
    annotator until they rank."""
    grading = get_object_or_404(Grading.objects.select_related("run", "group__batch"), pk=pk)
    group = grading.group
    if visible_ranking(Viewer(request.user), group).hide_grader:
        raise PermissionDenied("the grader's work is hidden until you save your ranking of this group")
    transcript = GradingTranscript.objects.filter(grading=grading).values_list("messages", flat=True).first()
    explained = grading.status == Grading.Status.DONE and grading.grader_version == heuristic.VERSION
    steps = {}
    if explained:
        steps = {e["trajectory"]: e for e in heuristic.HeuristicGrader().explain(group_cases([group.pk])[group.pk])}
    return render(request, "grading/detail.html", {
        "grading": grading, "group": group, "entries": transcript or [], "verdicts": _verdicts(grading, steps),
        "explained": explained,
    })


def _verdicts(grading: Grading, steps: dict) -> list[dict]:
    """The grader's ranking, one row per passing trajectory best first: rank, score, flags,
    rationale and, for the heuristic grader, the terms of its penalty (`steps`, by id)."""
    rows = []
    for rank, tier in tier_lines(grading.tiers or ()):
        for tid in tier:
            rows.append({"rank": rank, "tied": len(tier) > 1, "trajectory": tid,
                         "score": (grading.scores or {}).get(tid), "flags": (grading.flags or {}).get(tid, ()),
                         "rationale": (grading.rationales or {}).get(tid, ""),
                         "terms": steps.get(tid, {}).get("terms", ())})
    return rows
