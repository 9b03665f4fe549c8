"""The app's tables, by what they hold: imported rollouts, grading work, human review,
training runs and their figures, and what leaves the app (exports, API tokens).

Migrations 0001 and 0003 name the default callables by their old path
(`webapp.models.default_*`), so those stay importable from here.
"""

from webapp.models.annotation import Annotation, AnnotationPolicy, Lease, default_review_criteria
from webapp.models.audit import AuditFigures, AuditItem, AuditSet, AuditVerdict, GoldGroup, ReferenceProxy
from webapp.models.evidence import EvidenceProbe, EvidenceRun, GroupEvidence
from webapp.models.exports import ApiToken, Export
from webapp.models.grading import Grading, GradingRun, GradingTranscript
from webapp.models.renders import BatchPatch, PatchRender
from webapp.models.rollouts import Batch, Group, Trajectory, Transcript, default_advantage_config
from webapp.models.runs import BatchFigures, GradingPanel, Run, RunStep
from webapp.models.search import SearchState

__all__ = [
    "Annotation", "AnnotationPolicy", "ApiToken", "AuditFigures", "AuditItem", "AuditSet", "AuditVerdict", "Batch",
    "BatchFigures", "BatchPatch", "EvidenceProbe", "EvidenceRun", "Export", "GoldGroup", "Grading", "GradingPanel",
    "GradingRun", "GradingTranscript", "Group", "GroupEvidence", "Lease", "PatchRender", "ReferenceProxy", "Run",
    "RunStep", "SearchState", "Trajectory", "Transcript", "default_advantage_config", "default_review_criteria",
]
