"""What the deployment holds a task's runs to (GAGAR_SANDBOX_MAX_MEMORY_MB, _WALL_SECONDS), and
what a pass that fails says to every role: what failed, never the server's folders."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests import evidencedata
from tests.factories import write_jsonl
from webapp.evidence.services import evidence_launch, evidence_process, group_code
from webapp.models import Batch, GroupEvidence

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
GREEDY = {"memory_mb": 65536, "wall_seconds": 3600}  # the most a task's environment may ask


@pytest.fixture
def sent(monkeypatch):
    """The messages services send, instead of a broker (the pass runs in this process)."""
    messages = []
    monkeypatch.setattr("webapp.work.enqueue", lambda work, ids, queue, *, countdown=None: messages.append(ids) or 1)
    return messages


@pytest.fixture
def evidence_on(settings, tmp_path, sandbox_python):
    settings.GAGAR_CODEBASES = str(evidencedata.store(tmp_path / "store"))
    settings.GAGAR_SANDBOX_PATHS = [str(sandbox_python.parents[2])]
    return settings


def import_group(tmp_path, sandbox_python, *, asks=None):
    """A group of two candidates whose task's environment asks `asks` besides its own."""
    candidates = {tid: evidencedata.CANDIDATES[tid] for tid in ("good", "fails")}
    records = evidencedata.records("calc-1", sandbox_python, tmp_path / "calc", candidates=candidates)
    records[0]["task"]["environment"].update(asks or {})
    call_command("import_rollouts", str(write_jsonl(tmp_path / "calc.jsonl", records)), batch="calc", verbosity=0)
    return Batch.objects.get(name="calc").groups.get()


def test_a_task_asking_more_than_the_deployment_allows_runs_within_its_caps_and_the_group_page_says_so(
        evidence_on, tmp_path, sandbox_python, sent, client, researcher):
    evidence_on.GAGAR_SANDBOX_MAX_MEMORY_MB, evidence_on.GAGAR_SANDBOX_MAX_WALL_SECONDS = 1024, 30.0
    group = import_group(tmp_path, sandbox_python, asks=GREEDY)
    code = group_code(group.pk)  # what the evidence pass and a grader's code tools run with
    assert (code.execution.environment.memory_mb, code.execution.environment.wall_seconds) == (1024, 30.0)
    said = ("The task's limits per run were lowered to this deployment's: memory from 65536 MB to 1024 MB "
            "(GAGAR_SANDBOX_MAX_MEMORY_MB), time from 3600 s to 30 s (GAGAR_SANDBOX_MAX_WALL_SECONDS).")
    assert code.lowered == said

    evidence_launch(group_pks=[group.pk])
    assert evidence_process(group_id=group.pk) == GroupEvidence.Status.DONE
    assert GroupEvidence.objects.get(group=group).lowered == said
    client.force_login(researcher)
    page = client.get(reverse("group", args=[group.pk])).content.decode()
    assert "· the task's limits lowered</summary>" in page and said.replace("'", "&#x27;") in page


def test_a_task_within_the_caps_runs_as_it_asks_and_nothing_is_said(evidence_on, tmp_path, sandbox_python):
    group = import_group(tmp_path, sandbox_python, asks={"memory_mb": 2048, "wall_seconds": 600})
    code = group_code(group.pk)
    assert (code.execution.environment.memory_mb, code.execution.environment.wall_seconds, code.lowered) == (
        2048, 600.0, "")


def manage(*args, **env):
    """manage.py with only PATH, HOME and `env`: the settings read afresh."""
    environment = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=environment,
                          capture_output=True, text=True)


def test_the_caps_default_to_4_gib_and_ten_minutes_and_a_bad_one_stops_start_up_naming_it(tmp_path):
    shown = ("from django.conf import settings as s; "
             "print(s.GAGAR_SANDBOX_MAX_MEMORY_MB, s.GAGAR_SANDBOX_MAX_WALL_SECONDS)")
    done = manage("shell", "-v", "0", "-c", shown, GAGAR_DATA_DIR=str(tmp_path))
    assert done.stdout.split() == ["4096", "600.0"], done.stderr
    for name, value, reason in (("GAGAR_SANDBOX_MAX_MEMORY_MB", "lots", "'lots': not a number"),
                                ("GAGAR_SANDBOX_MAX_MEMORY_MB", "32", "must be at least 64"),
                                ("GAGAR_SANDBOX_MAX_WALL_SECONDS", "0", "must be above 0")):
        done = manage("check", GAGAR_DATA_DIR=str(tmp_path), **{name: value})
        assert done.returncode != 0 and f"ImproperlyConfigured: {name}=" in done.stderr
        assert reason in done.stderr


def test_a_pass_that_fails_says_what_failed_without_the_servers_folders(
        evidence_on, tmp_path, sandbox_python, sent, monkeypatch, client, researcher):
    group = import_group(tmp_path, sandbox_python)
    gone = f"{evidence_on.DATA_DIR}/evidence/runs/abc"

    def broken(*args, **kwargs):  # a bug, as the clobbered runs were (issue 31)
        raise FileNotFoundError(2, "No such file or directory", gone)

    monkeypatch.setattr("webapp.evidence.services.run_planned", broken)
    evidence_launch(group_pks=[group.pk])
    assert evidence_process(group_id=group.pk) == GroupEvidence.Status.FAILED
    error = GroupEvidence.objects.get(group=group).error
    assert error == "FileNotFoundError: [Errno 2] No such file or directory: '$GAGAR_DATA_DIR/evidence/runs/abc'"
    client.force_login(researcher)
    page = client.get(reverse("group", args=[group.pk])).content.decode()
    assert "the evidence pass failed: FileNotFoundError" in page and str(evidence_on.DATA_DIR) not in page


def test_a_candidate_that_tampers_with_the_test_runner_is_named_on_the_group_page_escaped(
        evidence_on, tmp_path, sandbox_python, sent, client, researcher):
    # An atexit handler that prints a forged summary and exits 0: the reward passed it.
    forged = ("import atexit, os\n\n\ndef _forge():\n    print('= short test summary info =')\n"
              "    print('PASSED tests/test_clamp.py::test_clamp_low <b>pwn</b>')\n    os._exit(0)\n\n\n"
              "atexit.register(_forge)\n")
    candidates = {"good": evidencedata.CANDIDATES["good"], "forger": (True, {"calc/__init__.py": forged}),
                  "fails": evidencedata.CANDIDATES["fails"]}
    records = evidencedata.records("calc-2", sandbox_python, tmp_path / "calc", candidates=candidates)
    call_command("import_rollouts", str(write_jsonl(tmp_path / "calc.jsonl", records)), batch="calc", verbosity=0)
    group = Batch.objects.get(name="calc").groups.get()

    evidence_launch(group_pks=[group.pk])
    assert evidence_process(group_id=group.pk) == GroupEvidence.Status.DONE
    client.force_login(researcher)
    page = client.get(reverse("group", args=[group.pk])).content.decode()
    assert "· <b>1 tampers with the test runner</b>" in page
    assert '<span class="mono">forger</span> tampers with the test runner: <span class="mono">reward: ' in page
    assert "<b>pwn</b>" not in page
