from django.shortcuts import get_object_or_404

from webapp.models import Trajectory
from webapp.roles import ANNOTATOR, AUDITOR, RESEARCHER, role_required

# Everyone with a role reads batches, groups and transcripts; what they may
# change (grading, rankings, audits) is decided by the views that change it.
READERS = (RESEARCHER, ANNOTATOR, AUDITOR)

reader_required = role_required(*READERS)


def query_int(value, default=0) -> int:
    """A non-negative integer from a query parameter; `default` when it is missing or not a number."""
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return default


def trajectory_or_404(pk) -> Trajectory:
    """A trajectory with its group and batch, without its patch text."""
    return get_object_or_404(Trajectory.objects.select_related("group", "batch").defer("patch"), pk=pk)
