"""The grading panel with the plain Django client: fragment and page, roles, forms."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.webapp.annotationdata import grade, review_batch, set_policy
from webapp.grading.services import grading_launch, panel_refresh
from webapp.grading.worker import gradings_process
from webapp.models import Grading, GradingPanel, GradingRun, GradingTranscript, Group

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    sent = []
    monkeypatch.setattr("webapp.work.enqueue", lambda work, ids, queue, **kw: sent.append(list(ids)))
    return sent


def login(client, user):
    client.force_login(user)
    return client


def panel(batch):
    return reverse("grading_panel", args=[batch.pk])


def test_it_redirects_anonymous_users_to_login(client, sample_batch):
    response = client.get(panel(sample_batch))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


def test_it_refuses_users_without_a_role(client, outsider, sample_batch):
    assert login(client, outsider).get(panel(sample_batch)).status_code == 403


@pytest.fixture
def blind_graded(tmp_path):
    """A blind batch whose grading flags a ranked trajectory with a flag the config caps."""
    group = Group.objects.get(batch=review_batch(tmp_path), group_id="task-1")
    set_policy(group.batch, blind=True)
    grade(group, flags={"t4": ["edits_tests"]})
    panel_refresh(group.batch.pk)  # what the panel's worker does once the grading commits
    return group.batch


def test_a_blind_annotator_reads_the_progress_and_is_told_the_results_are_hidden(client, annotator, blind_graded):
    body = login(client, annotator).get(panel(blind_graded)).content.decode()
    assert "1 of 1 mixed groups have a grader ranking" in body
    assert "The grader's results are hidden: the rankings of batch review are hidden from you" in body
    assert "flag-caps-table" not in body and "test-1" not in body  # the capped flag's row, the grader version


@pytest.mark.parametrize("role", ["researcher", "auditor"])
def test_researchers_and_auditors_read_the_grader_results(client, request, role, blind_graded):
    body = login(client, request.getfixturevalue(role)).get(panel(blind_graded)).content.decode()
    assert "flag-caps-table" in body and "test-1" in body and "The grader's results are hidden" not in body


def test_without_htmx_it_is_a_full_page_and_with_htmx_a_fragment(client, researcher, sample_batch):
    login(client, researcher)
    page = client.get(panel(sample_batch)).content.decode()
    fragment = client.get(panel(sample_batch), **HTMX).content.decode()
    assert page.startswith("<!doctype html>") and "<html" not in fragment
    assert 'id="grading-body"' in page and 'id="grading-body"' in fragment


def test_only_researchers_see_the_forms(client, researcher, annotator, sample_batch):
    assert "Launch grading" in login(client, researcher).get(panel(sample_batch)).content.decode()
    client.logout()
    body = login(client, annotator).get(panel(sample_batch)).content.decode()
    assert "Launch grading" not in body and "Save redistribution config" not in body


def test_it_polls_only_while_something_is_queued_or_running_or_its_figures_are_due(client, researcher,
                                                                                   sample_batch):
    login(client, researcher)
    body = client.get(panel(sample_batch), **HTMX).content.decode()
    assert 'hx-trigger="every 2s"' in body and "Updating: computed in a moment" in body  # never computed yet
    panel_refresh(sample_batch.pk)
    assert 'hx-trigger="every 2s"' not in client.get(panel(sample_batch), **HTMX).content.decode()
    run = grading_launch(batch=sample_batch, grader="heuristic").run
    body = client.get(panel(sample_batch), **HTMX).content.decode()
    assert 'hx-trigger="every 2s"' in body and "Updating every 2 s while grading runs" in body
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    panel_refresh(sample_batch.pk)
    body = client.get(panel(sample_batch), **HTMX).content.decode()
    assert 'hx-trigger="every 2s"' not in body
    assert "<svg" in body and "GRPO (before)" in body and "Redistributed (after)" in body


def test_the_panel_reads_stored_figures_and_says_when_they_are_being_updated(client, researcher, sample_batch):
    run = grading_launch(batch=sample_batch, grader="heuristic").run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    panel_refresh(sample_batch.pk)
    GradingPanel.objects.filter(batch=sample_batch).update(requested_at=timezone.now())  # a change since
    body = login(client, researcher).get(panel(sample_batch), **HTMX).content.decode()
    assert "Updating: these are the figures from before the batch's latest change" in body
    assert "GRPO (before)" in body and 'hx-trigger="every 2s"' in body


def test_failures_show_their_error_escaped(client, researcher, sample_batch):
    run = grading_launch(batch=sample_batch, grader="tests.workers.graders:ScriptedGrader",
                         config={"fail_on": "invoicekit-001"}).run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    body = login(client, researcher).get(panel(sample_batch)).content.decode()
    assert "cannot grade invoicekit-001: &lt;script&gt;alert(1)&lt;/script&gt; is not a patch" in body
    assert "<script>alert(1)" not in body
    assert "Retry failed" in body


def run_row(body, run):
    """The panel's row of `run`: its class and its cells, as the template writes them."""
    start = body.index(f"<td>#{run.pk} ·")
    return body[body.rindex("<tr", 0, start):body.index("</tr>", start)]


@pytest.mark.parametrize("fail_on, state, shown", [
    ("invoicekit", "failed", "Every grading failed"),  # every mixed group's id matches
    ("invoicekit-001", "partial", "1 of 6 gradings failed"),
    ("nothing-matches", "done", None),
])
def test_a_finished_run_shows_how_it_ended(client, researcher, sample_batch, fail_on, state, shown):
    # Regression: a run whose every grading failed showed a full "6/6" bar, like a success.
    run = grading_launch(batch=sample_batch, grader="tests.workers.graders:ScriptedGrader",
                         config={"fail_on": fail_on}).run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    body = login(client, researcher).get(panel(sample_batch), **HTMX).content.decode()
    row = run_row(body, run)
    assert f'class="run-{state}"' in row and f'run-state-{state}">{state}</span>' in row
    failed = run.gradings.filter(status=Grading.Status.FAILED).count()
    done_width = re.search(r'class="run-bar-done" x="[\d.]+" y="0" width="([\d.]+)"', row).group(1)
    assert float(done_width) == pytest.approx(100 * (6 - failed) / 6, abs=0.01)
    if shown:
        assert shown in body and "first error (invoicekit-001)" in body
    else:
        assert "first error" not in body


def test_a_running_run_is_not_shown_as_finished(client, researcher, sample_batch):
    run = grading_launch(batch=sample_batch, grader="heuristic").run
    row = run_row(login(client, researcher).get(panel(sample_batch), **HTMX).content.decode(), run)
    assert 'class="run-running"' in row and "0 done of 6" in row


def test_the_panel_shows_the_flag_cap_applied(client, researcher, sample_batch):
    # Regression: with the default config a trajectory flagged as a reward hack still gained advantage.
    run = grading_launch(batch=sample_batch, grader="heuristic").run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    panel_refresh(sample_batch.pk)
    login(client, researcher)
    body = client.get(panel(sample_batch), **HTMX).content.decode()
    assert "flagged (reward_hacking, edits_tests) capped at 0.0" in body
    table = body[body.index('class="table flag-caps-table"'):body.index("</table>", body.index("flag-caps-table"))]
    hack = table[table.index("invoicekit-006"):]
    hack = hack[:hack.index("</tr>")]
    assert "reward_hacking" in hack and "<td>0.000</td>" in hack  # factor 0 and advantage 0
    client.post(reverse("advantage_config", args=[sample_batch.pk]),
                {"schedule": "linear", "w_min": "0.2", "w_flag": "", "flag_names": ["reward_hacking", "edits_tests"],
                 "norm_by_std": "on", "unbiased_std": "on"})
    panel_refresh(sample_batch.pk)
    body = client.get(panel(sample_batch), **HTMX).content.decode()
    assert "flags cap nothing" in body and "<strong>not capped</strong>" in body


def test_a_zero_flag_cap_is_accepted_and_a_negative_one_refused(client, researcher, sample_batch):
    login(client, researcher)
    url = reverse("advantage_config", args=[sample_batch.pk])
    fields = {"schedule": "linear", "w_min": "0.5", "flag_names": ["reward_hacking"], "norm_by_std": "on"}
    assert client.post(url, {**fields, "w_flag": "0"}).status_code == 302
    sample_batch.refresh_from_db()
    assert sample_batch.advantage_config["w_flag"] == 0.0
    response = client.post(url, {**fields, "w_flag": "-0.5"})
    assert response.status_code == 400 and "w_flag must be in [0, 1], got -0.5" in response.content.decode()


def test_launch_rejects_get_and_non_researchers(client, annotator, sample_batch):
    url = reverse("grading_launch", args=[sample_batch.pk])
    assert client.post(url, {"grader": "heuristic"}).status_code == 302  # anonymous: to login
    login(client, annotator)
    assert client.post(url, {"grader": "heuristic"}).status_code == 403
    assert client.get(url).status_code == 405
    assert not GradingRun.objects.exists()


def test_a_researcher_launches_grading_of_the_mixed_groups(client, researcher, sample_batch, no_broker):
    login(client, researcher)
    response = client.post(reverse("grading_launch", args=[sample_batch.pk]), {"grader": "heuristic"})
    assert response.status_code == 302 and response.url == panel(sample_batch)
    run = GradingRun.objects.get()
    mixed = sample_batch.groups.filter(label="mixed").count()
    assert (run.grader, run.created_by, run.gradings.count()) == ("heuristic", researcher, mixed)
    assert f"Queued {mixed} groups for heuristic." in client.get(response.url).content.decode()


def test_launch_over_htmx_answers_with_the_panel(client, researcher, sample_batch):
    login(client, researcher)
    response = client.post(reverse("grading_launch", args=[sample_batch.pk]), {"grader": "heuristic"}, **HTMX)
    body = response.content.decode()
    assert response.status_code == 200 and 'id="grading-body"' in body and "Queued" in body


def test_launch_needs_the_csrf_token(researcher, sample_batch):
    from django.test import Client

    client = login(Client(enforce_csrf_checks=True), researcher)
    assert client.post(reverse("grading_launch", args=[sample_batch.pk]), {"grader": "heuristic"}).status_code == 403


def test_launch_of_an_unknown_profile_shows_the_error(client, researcher, sample_batch):
    login(client, researcher)
    response = client.post(reverse("grading_launch", args=[sample_batch.pk]), {"grader": "gpt-9"})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert not GradingRun.objects.exists()


def test_the_launch_form_offers_the_profiles_of_the_graders_file(client, researcher, sample_batch, tmp_path,
                                                                  monkeypatch):
    graders = tmp_path / "graders.toml"
    graders.write_text('[graders.tiny-cpu]\nbackend = "transformers"\nmodel = "/models/tiny"\n')
    monkeypatch.setenv("GAGAR_GRADERS", str(graders))
    login(client, researcher)
    page = client.get(reverse("grading_panel", args=[sample_batch.pk])).content.decode()
    assert "tiny-cpu (transformers, cpu queue)" in page and "heuristic" in page


def test_a_broken_graders_file_is_shown_not_hidden(client, researcher, sample_batch, tmp_path, monkeypatch):
    graders = tmp_path / "graders.toml"
    graders.write_text('[graders.tiny-cpu]\nqueue = "tpu"\n')
    monkeypatch.setenv("GAGAR_GRADERS", str(graders))
    login(client, researcher)
    page = client.get(reverse("grading_panel", args=[sample_batch.pk])).content.decode()
    assert "graders.tiny-cpu.queue: must be one of cpu, gpu" in page


def test_retry_queues_the_failed_gradings(client, researcher, sample_batch):
    run = grading_launch(batch=sample_batch, grader="tests.workers.graders:ScriptedGrader",
                         config={"fail_on": "invoicekit-001"}).run
    gradings_process(grading_ids=list(run.gradings.values_list("pk", flat=True)))
    login(client, researcher)
    response = client.post(reverse("grading_retry", args=[sample_batch.pk]), **HTMX)
    assert "Queued 1 failed gradings again." in response.content.decode()
    assert not run.gradings.filter(status=Grading.Status.FAILED).exists()


def test_a_researcher_sets_the_redistribution_config(client, researcher, sample_batch):
    login(client, researcher)
    url = reverse("advantage_config", args=[sample_batch.pk])
    response = client.post(url, {"schedule": "top_m", "m": "2", "w_min": "0.3", "w_flag": "0.1",
                                 "flag_names": ["reward_hacking"], "norm_by_std": "on", "unbiased_std": "on"})
    assert response.status_code == 302
    sample_batch.refresh_from_db()
    assert sample_batch.advantage_config == {
        "schedule": "top_m", "params": {"m": 2, "w_min": 0.3}, "norm_by_std": True, "unbiased_std": True,
        "w_flag": 0.1, "flag_names": ["reward_hacking"]}


def test_an_invalid_redistribution_config_is_refused(client, researcher, annotator, sample_batch):
    url = reverse("advantage_config", args=[sample_batch.pk])
    before = dict(sample_batch.advantage_config)
    login(client, researcher)
    response = client.post(url, {"schedule": "linear", "w_min": "7"})
    assert response.status_code == 400 and "w_min must be in (0, 1]" in response.content.decode()
    client.logout()
    assert login(client, annotator).post(url, {"schedule": "linear", "w_min": "0.5"}).status_code == 403
    sample_batch.refresh_from_db()
    assert sample_batch.advantage_config == before


def test_the_panel_has_no_inline_script_or_style(client, researcher, sample_batch):
    body = login(client, researcher).get(panel(sample_batch), **HTMX).content.decode()
    assert "<script" not in body and "style=" not in body and "<style" not in body


def test_the_grading_page_shows_the_graders_conversation_escaped(client, researcher, sample_batch):
    group = sample_batch.groups.filter(label="mixed").first()
    run = GradingRun.objects.create(batch=sample_batch, grader="tiny-cpu", config={})
    grading = Grading.objects.create(run=run, group=group, status=Grading.Status.DONE, grader_version="tiny:p1",
                                     queued_at=timezone.now(),
                                     tokens=42, usage={"prompt_tokens": 30, "completion_tokens": 12})
    GradingTranscript.objects.create(grading=grading, messages=[
        {"run": 0, "turn": 1, "role": "assistant", "content": '{"tool": "view_patch"}',
         "action": {"tool": "view_patch"}, "tokens": 12},
        {"run": 0, "turn": 1, "role": "tool", "tool": "view_patch", "content": "<script>alert(1)</script>"},
        {"run": 0, "event": "result"},
    ])
    login(client, researcher)
    page = client.get(reverse("grading_detail", args=[grading.pk])).content.decode()
    assert "tiny:p1" in page and "calls view_patch" in page and "42" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page


def test_a_blind_annotator_cannot_open_the_grading_before_ranking(client, annotator, sample_batch):
    from webapp.models import AnnotationPolicy

    AnnotationPolicy.objects.update_or_create(batch=sample_batch, defaults={"blind": True})
    group = sample_batch.groups.filter(label="mixed").first()
    run = GradingRun.objects.create(batch=sample_batch, grader="heuristic", config={})
    grading = Grading.objects.create(run=run, group=group, status=Grading.Status.DONE, queued_at=timezone.now())
    login(client, annotator)
    assert client.get(reverse("grading_detail", args=[grading.pk])).status_code == 403
