"""The visibility rule (webapp.rankings.Viewer) inside the reads: people's ranking chains, and
the stored copies of grader-derived data (triage columns, stored figures), are read only
through functions that take the viewer, and hide from an annotator what the rule hides."""

import inspect
from pathlib import Path

import pytest

from tests.django_fixtures import make_user
from tests.webapp.annotationdata import GRADER_TIERS, review_batch, save, set_policy
from webapp import triage
from webapp.audit import figures as audit_figures
from webapp.audit import report as audit_report
from webapp.audit import selectors as audit_selectors
from webapp.batches import selectors as batch_selectors
from webapp.grading import selectors as grading_selectors
from webapp.models import Group
from webapp.rankings import UNRESTRICTED, Viewer, chain_heads, final_rankings, grader_rankings, visible_ranking
from webapp.roles import ANNOTATOR
from webapp.runs import selectors as run_selectors

pytestmark = pytest.mark.django_db

READS = (grader_rankings, final_rankings, chain_heads, visible_ranking, triage.visible_triage,
         batch_selectors.group_page, batch_selectors.neighbours, grading_selectors.panel_figures,
         grading_selectors.batch_grading_status, run_selectors.run_figures, run_selectors.require_run,
         audit_figures.dashboard, audit_figures.progress, audit_report.set_report, audit_selectors.verified_ranking)


@pytest.mark.parametrize("read", READS, ids=lambda read: f"{read.__module__}.{read.__name__}")
def test_a_read_of_rankings_or_of_their_stored_copies_cannot_be_made_without_a_viewer(read):
    viewer = inspect.signature(read).parameters.get("viewer")
    assert viewer is not None and viewer.default is inspect.Parameter.empty, read


def test_the_triage_columns_have_no_read_that_skips_the_viewer():
    assert not hasattr(triage, "triage_columns") and not hasattr(triage, "blank_hidden")


def test_only_the_rankings_module_reads_the_chains_without_the_rule():
    root = Path(__file__).resolve().parents[2]
    callers = sorted(str(path.relative_to(root)) for path in (root / "webapp").rglob("*.py")
                     if path != root / "webapp" / "rankings.py" and "_chain_heads" in path.read_text(encoding="utf-8"))
    assert callers == []


@pytest.fixture
def ranked(tmp_path, researcher):
    """A group with a final-chain ranking by a researcher, made before k-way overlap was set."""
    group = Group.objects.get(batch=review_batch(tmp_path))
    save(group, researcher, GRADER_TIERS)
    return group


def test_an_annotator_under_k_way_overlap_gets_no_other_peoples_chain_heads_until_they_rank(ranked, researcher):
    set_policy(ranked.batch, overlap=2, blind=True)
    anna = make_user("anna", ANNOTATOR)
    assert chain_heads([ranked.pk], viewer=Viewer(anna)) == []
    [head] = chain_heads([ranked.pk], viewer=UNRESTRICTED)
    assert chain_heads([ranked.pk], viewer=Viewer(researcher)) == [head] and head.user == researcher
    save(ranked, anna, [["t2"], ["t1", "t3"], ["t4"], ["t5"]])  # her own chain: the final one shows now
    assert chain_heads([ranked.pk], viewer=Viewer(anna)) == [head]


def test_blind_review_alone_hides_the_grader_not_the_final_chain(ranked):
    set_policy(ranked.batch, blind=True)
    anna = make_user("anna", ANNOTATOR)
    [head] = chain_heads([ranked.pk], viewer=Viewer(anna))
    assert head.user.get_username() == "rita"
    assert visible_ranking(Viewer(anna), ranked).final_head == head  # as the group page shows it
