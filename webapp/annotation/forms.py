"""Forms of the annotation pages: they only parse and validate shapes; services decide.

The ranking form has one set of fields per passing trajectory, named by its
primary key (ids are untrusted text): `rank-<pk>` (a number; equal numbers
tie; the form without JavaScript), `flag-<pk>` (repeated), `rationale-<pk>`;
and `tiers`, the ranking as JSON, which the editor's script fills in and
which wins when present. Any trajectory may carry `override-<pk>` (its test
verdict turned around) and `override-reason-<pk>`. A trajectory that passes
its tests but is marked not passing leaves the ranking: its rank, flags and
rationale are dropped (docs/annotation.md, "Reward overrides").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django import forms

from grading.rankings import parse_tiers, tiers_from_ranks
from webapp.annotation.editor import Start
from webapp.annotation.services import InvalidAnnotation
from webapp.models import AnnotationPolicy

TIERS_LIMIT = 200_000  # characters of JSON
RANKING_FIELDS = ("rank-", "flag-", "rationale-")
OVERRIDE_FIELDS = ("override-reason-", "override-")  # longest first: a key matches one prefix


def _int(value, what: str, *, blank=None):
    if value in (None, ""):
        if blank is not None:
            return blank
        raise InvalidAnnotation(f"{what} is missing")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidAnnotation(f"{what} must be a whole number, not {str(value)[:40]!r}") from None


@dataclass
class RankingInput:
    tiers: tuple[tuple[str, ...], ...]
    flags: dict[str, list[str]]
    rationales: dict[str, str]
    group_rationale: str
    based_on_version: int
    grading_id: int | None
    verdicts: dict[str, dict] = field(default_factory=dict)
    unranked: tuple[str, ...] = ()

    @classmethod
    def from_post(cls, post, trajectories) -> RankingInput:
        """Parse what the editor sent about the group's `trajectories`; InvalidAnnotation for a
        malformed field (the service checks that the ranking is a ranking of the group)."""
        everyone = {str(t.pk): t for t in trajectories}
        for key in post:
            prefix = next((p for p in OVERRIDE_FIELDS if key.startswith(p)), None)
            if prefix and key[len(prefix):] not in everyone:
                raise InvalidAnnotation(f"{key}: not a trajectory of this group")
        verdicts = {t.trajectory_id: {"passed": not t.passed, "reason": post.get(f"override-reason-{pk}", "")}
                    for pk, t in everyone.items() if post.get(f"override-{pk}")}
        # passing by the tests but marked not passing: out of the ranking, whatever its fields say
        left = {pk for pk, t in everyone.items() if t.passed and t.trajectory_id in verdicts}
        by_pk = {pk: t.trajectory_id for pk, t in everyone.items()
                 if pk not in left and (t.passed or t.trajectory_id in verdicts)}
        for key in post:
            prefix = next((p for p in RANKING_FIELDS if key.startswith(p)), None)
            if prefix and key[len(prefix):] not in by_pk and key[len(prefix):] not in left:
                raise InvalidAnnotation(f"{key}: not a passing trajectory of this group")
        based_on = _int(post.get("based_on_version"), "based_on_version")
        if based_on < 0:
            raise InvalidAnnotation("based_on_version must not be negative")
        grading_id = _int(post.get("grading_id"), "grading_id", blank=0) or None
        raw = post.get("tiers", "").strip()
        if raw:
            if len(raw) > TIERS_LIMIT:
                raise InvalidAnnotation(f"the ranking is over {TIERS_LIMIT} characters")
            try:
                tiers = parse_tiers(json.loads(raw))
            except ValueError as error:
                raise InvalidAnnotation(f"tiers: {error}") from None
            gone = {everyone[pk].trajectory_id for pk in left}
            tiers = tuple(kept for kept in (tuple(t for t in tier if t not in gone) for tier in tiers) if kept)
            ranked = {t for tier in tiers for t in tier}
            unranked = tuple(t for t in by_pk.values() if t not in ranked)
        else:
            ranks = {}
            for pk, tid in by_pk.items():
                rank = _int(post.get(f"rank-{pk}", "").strip(), f"the rank of {tid}", blank=-1)
                if rank == 0 or rank < -1:
                    raise InvalidAnnotation(f"the rank of {tid} must be 1 or more")
                ranks[tid] = None if rank == -1 else rank
            tiers, unranked = tiers_from_ranks(ranks)
        return cls(
            tiers=tiers,
            flags={tid: post.getlist(f"flag-{pk}") for pk, tid in by_pk.items() if post.getlist(f"flag-{pk}")},
            rationales={tid: post.get(f"rationale-{pk}", "") for pk, tid in by_pk.items()
                        if post.get(f"rationale-{pk}", "").strip()},
            group_rationale=post.get("group_rationale", ""),
            based_on_version=based_on,
            grading_id=grading_id,
            verdicts=verdicts,
            unranked=unranked,
        )

    def start(self) -> Start:
        """The editor as it was sent, to show again with the error."""
        return Start(tiers=self.tiers, flags=self.flags, rationales=self.rationales,
                     group_rationale=self.group_rationale, verdicts=self.verdicts,
                     label="your ranking as you sent it (not saved)")


class RevertForm(forms.Form):
    to_version = forms.IntegerField(min_value=0)
    based_on_version = forms.IntegerField(min_value=0)


class PolicyForm(forms.ModelForm):
    criteria = forms.MultipleChoiceField(choices=AnnotationPolicy.Criterion.choices,
                                         widget=forms.CheckboxSelectMultiple, label="Queue holds mixed groups that are")
    confidence_below = forms.FloatField(min_value=0, max_value=1, label="low confidence: below")
    sample_rate = forms.FloatField(min_value=0, max_value=1, label="sample share")
    sample_seed = forms.IntegerField(min_value=0, max_value=1_000_000, label="seed")
    overlap = forms.IntegerField(min_value=1, max_value=10, label="annotators per group (k)")
    lease_minutes = forms.IntegerField(min_value=1, max_value=24 * 60, label="lease (minutes)")

    class Meta:
        model = AnnotationPolicy
        fields = ["criteria", "confidence_below", "sample_rate", "sample_seed", "blind", "overlap", "lease_minutes"]
        labels = {"blind": "blind review (hide the grader until the annotator submits)"}

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", "policy-%s")
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
