"""How far annotators agree with each other where they ranked the same groups independently
(k-way overlap: each in a chain of their own, webapp.models.Annotation): the human ceiling that
a grader version's agreement with people is read against. webapp.audit.figures stores it as a
part of the dashboard's figures.

Per batch, over the groups that two annotators or more ranked (each one's latest ranking):
Kendall's W and the mean pairwise Kendall tau-b, per group and averaged over groups with a
bootstrap interval over groups, and Krippendorff's alpha (ordinal) over every trajectory of
those groups at once (grading.agreement defines each).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from grading.agreement import Estimate, kendalls_w, krippendorff_alpha_ordinal, mean_estimates, mean_pairwise_tau
from webapp.models import Annotation, Batch

EVERY_BATCH = "every batch"


@dataclass(frozen=True)
class BatchConcordance:
    batch: str  # the batch's name, or EVERY_BATCH
    groups: int  # groups that two annotators or more ranked independently
    raters: int  # the annotators who ranked them
    kendalls_w: Estimate  # mean over groups; n: the groups where it is defined
    pairwise_tau: Estimate
    alpha: float | None  # over the trajectories of all `groups`


@dataclass(frozen=True)
class Concordance:
    batches: list[BatchConcordance]  # by batch name, then EVERY_BATCH where there are several


def concordance(batch: Batch | None) -> Concordance:
    """The concordance of each batch of the selection (`batch`, or every batch) that has
    groups ranked independently by two annotators or more."""
    heads = Annotation.objects.filter(independent=True)
    if batch is not None:
        heads = heads.filter(group__batch=batch)
    rows = (heads.annotate(head=Window(RowNumber(), partition_by=[F("group_id"), F("user_id")],
                                       order_by=F("version").desc()))
            .filter(head=1).values_list("group__batch__name", "group_id", "user_id", "tiers"))
    by_batch: dict[str, dict[int, dict[int, list]]] = defaultdict(lambda: defaultdict(dict))
    for name, group, user, tiers in rows:
        if tiers is not None:  # an own chain handed back to the grader holds no ranking of that annotator
            by_batch[name][group][user] = tiers
    shared = {name: [by_rater for _, by_rater in sorted(groups.items()) if len(by_rater) > 1]
              for name, groups in sorted(by_batch.items())}
    shared = {name: groups for name, groups in shared.items() if groups}
    out = [_measure(name, groups) for name, groups in shared.items()]
    if len(out) > 1:
        out.append(_measure(EVERY_BATCH, [g for groups in shared.values() for g in groups]))
    return Concordance(out)


def _measure(name: str, groups: list[dict[int, list]]) -> BatchConcordance:
    """`groups`: per group, each annotator's tiers, by user pk; in group order, so the same
    groups give the same bootstrap draws."""
    w = np.array([np.nan if (v := kendalls_w(list(g.values()))) is None else v for g in groups])
    tau = np.array([np.nan if (v := mean_pairwise_tau(list(g.values()))) is None else v for g in groups])
    w_estimate, tau_estimate = mean_estimates([w, tau])
    return BatchConcordance(batch=name, groups=len(groups), raters=len({user for g in groups for user in g}),
                            kendalls_w=w_estimate, pairwise_tau=tau_estimate, alpha=krippendorff_alpha_ordinal(groups))
