from grading.formats import ImportNotes, Inputs, check_inputs, read_rollouts_from
from grading.jsonl import ErrorLog


def read(file_format, paths, reports=(), tasks=(), name_by_run=False):
    """(rollouts, error messages, notes) of reading these files in `file_format`."""
    errors, notes = ErrorLog(), ImportNotes()
    inputs = Inputs(paths=[str(p) for p in paths], reports=[str(r) for r in reports],
                    tasks=[str(t) for t in tasks], name_by_run=name_by_run)
    check_inputs(file_format, inputs, errors)
    if errors:
        return [], errors.messages, notes
    rollouts = list(read_rollouts_from(file_format, inputs, errors=errors, notes=notes, pass_threshold=1.0))
    return rollouts, errors.messages, notes


def by_group(rollouts):
    groups = {}
    for r in rollouts:
        groups.setdefault(r.group_id, {})[r.trajectory_id] = r.reward
    return groups
