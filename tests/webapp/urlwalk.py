"""Every named URL pattern of the project, filled in for a group that holds a marker in
everything some role may not see: for the tests that walk them all."""

from django.urls import URLPattern, URLResolver, get_resolver, reverse

from tests.django_fixtures import make_user
from tests.webapp.annotationdata import grade, review_batch, save, set_policy
from webapp.audit.sampling import Source, audit_plan
from webapp.audit.services import audit_set_create, verdict_save
from webapp.exports.selectors import exports_root
from webapp.grading.services import panel_refresh
from webapp.models import Export, GradingTranscript, Group, Run, RunStep, Trajectory
from webapp.roles import ANNOTATOR, AUDITOR
from webapp.runs.services import figures_refresh

PUBLIC = {"login", "logout"}
PASSING = [["t1"], ["t2", "t3"], ["t4"], ["t5"]]


def url_patterns(resolvers=None, prefix=""):
    """(name, route) of every named URL pattern outside the admin, the API and the login pages."""
    for entry in resolvers if resolvers is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace in ("admin", "api"):  # the API answers 401/403 in JSON: tests/webapp/api
                continue
            yield from url_patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern) and entry.name and entry.name not in PUBLIC:
            yield entry.name, prefix + str(entry.pattern)


def marked_group(tmp_path, researcher):
    """A group whose grader, another annotator and another auditor each left a marker; the
    batch's policy is blind review with 2-way overlap (tests change it)."""
    group = Group.objects.get(batch=review_batch(tmp_path), group_id="task-1")
    set_policy(group.batch, blind=True, overlap=2)
    grading = grade(group, confidence=0.876543, flags={"t4": ["edits_tests"]},  # capped by default
                    rationales={"t1": "GRADER-RATIONALE-SECRET"})
    grading.scores = {"t1": 0.918273, "t2": 0.5, "t3": 0.5, "t4": 0.25, "t5": 0.125}
    grading.grader_version = grading.run.grader_version = "GRADER-VERSION-SECRET"
    grading.save()
    grading.run.save()
    GradingTranscript.objects.create(grading=grading, messages=[
        {"run": 0, "turn": 1, "role": "assistant", "content": "GRADER-TRANSCRIPT-SECRET"}])
    save(group, make_user("other-annotator", ANNOTATOR), PASSING,
         rationales={"t2": "OTHER-ANNOTATOR-RATIONALE-SECRET"}, group_rationale="OTHER-ANNOTATOR-GROUP-SECRET")
    plan = audit_plan(source=Source(batch=group.batch), stratify_by=None, bins=4, seed=0, size=1, half_width=None,
                      confidence=0.95)
    item = audit_set_create(name="walk", plan=plan, user=researcher).items.get()
    verdict_save(item=item, auditor=make_user("other-auditor", AUDITOR), verdict="correct", categories=[],
                 notes="OTHER-AUDITOR-NOTES-SECRET")
    # The batch is a step of a run, whose pages show figures of its rankings.
    RunStep.objects.create(run=Run.objects.create(name="walk"), number=0, batch=group.batch)
    figures_refresh(group.batch_id)
    panel_refresh(group.batch_id)
    return group, grading, item


def urls_of(group, grading, item):
    """Every named URL pattern filled in for `group`; a pattern this cannot fill fails the test."""
    trajectory = Trajectory.objects.get(group=group, trajectory_id="t1")
    other = Trajectory.objects.get(group=group, trajectory_id="t2")
    path = trajectory.patch.split("\n", 1)[0].split(" b/", 1)[1]
    queries = {"interdiff": f"?a={trajectory.pk}&b={other.pk}", "patch_file": f"?path={path}"}
    export = Export.objects.create(batch=group.batch, kind="advantages", format="parquet", status=Export.Status.DONE,
                                   folder="walk", files=[{"name": "manifest.json", "bytes": 2, "sha256": "0" * 64}])
    (exports_root() / "walk").mkdir(parents=True, exist_ok=True)
    (exports_root() / "walk" / "manifest.json").write_text("{}")
    run = RunStep.objects.get(batch=group.batch).run
    queries["runs_compare"] = f"?run={run.pk}&run={Run.objects.create(name='walk-baseline').pk}"
    by_prefix = {"batches": group.batch_id, "groups": group.pk, "trajectories": trajectory.pk,
                 "gradings": grading.pk, "exports": export.pk, "audit/sets": item.audit_set_id,
                 "audit/items": item.pk, "runs": run.pk}
    urls = {}
    for name, route in url_patterns():
        kwargs = {}
        if "<int:pk>" in route:
            prefix = max((p for p in by_prefix if route.startswith(f"{p}/")), key=len, default=route.split("/")[0])
            assert prefix in by_prefix, f"the walk cannot fill {route!r}: teach it {prefix}/"
            kwargs["pk"] = by_prefix[prefix]
        kwargs.update({key: 0 for key in ("index", "part") if f"<int:{key}>" in route})
        kwargs.update({"name": "manifest.json"} if "<str:name>" in route else {})
        kwargs.update({"table": "agreement"} if "<slug:table>" in route else {})
        urls[name] = reverse(name, kwargs=kwargs) + queries.get(name, "")
    return urls
