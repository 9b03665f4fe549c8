"""Training runs: the list, a run's page of charts over its steps (with the table of their
numbers and its CSV), the comparison of runs aligned by step, the whole run's export and the
pruning of old steps.

Every figure is read as the figures' worker stored it (webapp.runs.figures); a step whose
figures are due says so ("updating") and shows the previous ones. Figures carry the grader's
rankings: a viewer from whom any step's rankings are hidden is told so instead.
"""

import csv
import hashlib

from django.contrib import messages
from django.core.cache import cache
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST, require_safe

from webapp.exports.services import ExportError
from webapp.models import Run
from webapp.rankings import RankingsHidden, Viewer
from webapp.roles import RESEARCHER, has_role, may_export, reader_required, role_required
from webapp.runs import selectors
from webapp.runs.charts import DOTS_UP_TO, Key, Series, step_chart
from webapp.runs.forms import CompareForm, PruneForm
from webapp.runs.services import run_prune

FIGURES_CACHE_S = 24 * 3600


@require_safe
@reader_required
def runs(request):
    return render(request, "runs/runs.html", {"runs": selectors.runs_overview()})


@require_safe
@reader_required
def run_page(request, pk):
    run = get_object_or_404(Run, pk=pk)
    viewer = Viewer(request.user)
    try:
        selectors.require_run(run, viewer=viewer)
    except RankingsHidden as error:
        return render(request, "runs/run.html", {"run": run, "hidden": str(error)})
    return render(request, "runs/run.html", {
        "run": run, "figures_html": _figures_html(run, viewer),
        "others": list(Run.objects.exclude(pk=run.pk).only("pk", "name")),
        "can_export": may_export(request.user), "can_prune": has_role(request.user, RESEARCHER),
        "prune_form": PruneForm(initial={"keep_last": 10}),
    })


def _figures_html(run: Run, viewer: Viewer) -> str:
    """The run page's figures: the same for every viewer allowed to see them, and drawn again
    only once a step's figures, wait or pruning changed (`run_watermark`), in each web process.
    A thousand steps' charts take a tenth of a second to draw; their watermark, a query."""
    def draw() -> str:
        figures = selectors.run_figures(run, viewer=viewer)
        return render_to_string("runs/_figures.html", {
            "run": run, "figures": figures, "charts": _charts([figures]),
            "pruned": [step.number for step in figures.steps if step.pruned]})

    return _drawn_once("run-figures", selectors.run_watermark(run), draw)


@require_safe
@reader_required
def run_table(request, pk):
    """Every step's numbers, one row per step and one column per line of the charts."""
    run = get_object_or_404(Run, pk=pk)
    try:
        figures = selectors.run_figures(run, viewer=Viewer(request.user))
    except RankingsHidden as error:
        return render(request, "runs/run.html", {"run": run, "hidden": str(error)})
    lines = [line for measure in figures.measures for line in measure.lines]
    rows = [(step, [line.value(step) for line in lines]) for step in figures.steps]
    return render(request, "runs/table.html", {"run": run, "figures": figures, "lines": lines, "rows": rows})


@require_safe
@reader_required
def run_csv(request, pk):
    run = get_object_or_404(Run, pk=pk)
    try:
        figures = selectors.run_figures(run, viewer=Viewer(request.user))
    except RankingsHidden as error:
        return HttpResponse(str(error), status=403, content_type="text/plain; charset=utf-8")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-figures.csv"'
    writer = csv.writer(response)
    writer.writerow(["step", "batch", "updating", "pruned", *(line.key for line in selectors.TABLE_LINES)])
    for step in figures.steps:
        writer.writerow([step.number, step.batch_name, int(step.updating), int(step.pruned),
                         *("" if (v := line.value(step)) is None else v for line in selectors.TABLE_LINES)])
    return response


@require_safe
@reader_required
def runs_compare(request):
    """Two or more runs on the same charts, aligned by step, with each line's mean over the
    steps they share and its difference from the first run's."""
    form = CompareForm(request.GET, runs=[s.run for s in selectors.runs_overview()])
    if not form.is_valid():
        return render(request, "runs/compare.html", {"form": form}, status=400 if request.GET else 200)
    viewer = Viewer(request.user)
    runs = selectors.runs_by_ids(form.cleaned_data["run"])
    try:
        for run in runs:
            selectors.require_run(run, viewer=viewer)
    except RankingsHidden as error:
        return render(request, "runs/compare.html", {"form": form, "hidden": str(error)})
    return render(request, "runs/compare.html", {"form": form, "compared_html": _compared_html(runs, viewer)})


def _compared_html(runs: list[Run], viewer: Viewer) -> str:
    """The compare page's charts and differences, drawn again only once a run's watermark moved."""
    def draw() -> str:
        figures = [selectors.run_figures(run, viewer=viewer) for run in runs]
        common, differences = selectors.compare(figures)
        return render_to_string("runs/_compared.html", {
            "runs": figures, "charts": _charts(figures), "common": common, "differences": differences})

    return _drawn_once("runs-compared", [selectors.run_watermark(run) for run in runs], draw)


def _drawn_once(name: str, watermark, draw) -> str:
    """`draw()`'s HTML, kept in the cache under `watermark` (it changes when the figures do)."""
    key = f"gagar:{name}:" + hashlib.sha256(repr(watermark).encode()).hexdigest()
    html = cache.get(key)
    if html is None:
        html = draw()
        cache.set(key, html, FIGURES_CACHE_S)
    return mark_safe(html)  # noqa: S308 - rendered by the templates of `draw`, which escape


@require_safe
@reader_required
def run_export(request, pk):
    """The whole run's advantages: a tar of the Parquet dataset partitioned by step and its manifest."""
    run = get_object_or_404(Run, pk=pk)
    if not may_export(request.user):
        return HttpResponse("exports carry the grader's rankings: researchers only", status=403,
                            content_type="text/plain; charset=utf-8")
    from webapp.runs.exports import run_dataset_tar  # pyarrow, for this view only

    try:
        stream = run_dataset_tar(run, viewer=Viewer(request.user),
                                 allow_ungraded=request.GET.get("allow_ungraded") == "1")
    except (ExportError, RankingsHidden) as error:
        messages.error(request, str(error))
        return redirect("run", run.pk)
    response = StreamingHttpResponse(stream, content_type="application/x-tar")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-advantages.tar"'
    return response


@require_POST
@role_required(RESEARCHER)
def run_prune_view(request, pk):
    run = get_object_or_404(Run, pk=pk)
    form = PruneForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect("run", run.pk)
    pruned = run_prune(run=run, keep_last=form.cleaned_data["keep_last"])
    if pruned.steps:
        messages.success(request, f"Pruned {len(pruned.steps)} steps ({pruned.steps[0]} to {pruned.steps[-1]}): "
                                  f"{pruned.transcripts} transcripts, {pruned.search_entries} search entries and "
                                  "their rendered patches removed; rankings, advantages and figures kept.")
    else:
        messages.success(request, "Nothing to prune: the older steps were pruned already.")
    return redirect("run", run.pk)


def _charts(runs: list[selectors.RunFigures]) -> list[dict]:
    """One chart per measure with data in some run. On one run's page a colour per line, and a
    click on a step opens its batch page with the chart's first line's filter, on a line's dot
    (when the steps are few) with that line's. When comparing, a colour per run and a dash
    pattern per line: a colour per (run, line) made 14 lines no one could tell apart."""
    steps = sorted({step.number for r in runs for step in r.steps})
    measures = runs[0].measures if len(runs) == 1 else selectors.shown_measures(s for r in runs for s in r.steps)
    markers = [(n, f"{r.run.name}: {text}" if len(runs) > 1 else text) for r in runs for n, text in r.config_changes]
    aligned = [[by_number.get(n) for n in steps] for by_number in ({s.number: s for s in r.steps} for r in runs)]
    batch_url = reverse("batch", args=[0]).removesuffix("0/")  # "/batches/": a reverse per step is slow
    comparing = len(runs) > 1
    out = []
    for measure in measures:
        series = []
        for run_index, (r, row) in enumerate(zip(runs, aligned, strict=True)):
            for i, line in enumerate(measure.lines):
                values = [None if step is None else step.series.get(line.key) for step in row]
                links = None
                if not comparing and (i == 0 or len(steps) <= DOTS_UP_TO):  # the columns' links, and each dot's
                    query = f"?{line.drill}" if line.drill else ""
                    links = [f"{batch_url}{step.batch_id}/{query}" for step in row]
                if comparing:
                    series.append(Series(label=f"{r.run.name} · {line.label}", values=values, colour=run_index,
                                         dash=i))
                else:
                    series.append(Series(label=line.label, values=values, links=links))
        legend, note = None, ""
        if comparing:
            legend = [Key(r.run.name, colour=n) for n, r in enumerate(runs)]
            if len(measure.lines) > 1:
                legend += [Key(line.label, dash=i) for i, line in enumerate(measure.lines)]
                note = "Colour: the run. Dash: the line."
        out.append({"measure": measure, "svg": step_chart(title=measure.title, desc=measure.desc, steps=steps,
                                                          series=series, low=measure.low, high=measure.high,
                                                          unit=measure.unit, markers=markers, legend=legend,
                                                          note=note)})
    return out
