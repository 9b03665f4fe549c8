from webapp.roles import ANNOTATOR, AUDITOR, RESEARCHER, role_required

# Everyone with a role reads batches, groups and transcripts; what they may
# change (grading, rankings, audits) is decided by the views that change it.
READERS = (RESEARCHER, ANNOTATOR, AUDITOR)

reader_required = role_required(*READERS)
