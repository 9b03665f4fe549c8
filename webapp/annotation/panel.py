"""The ranking part of the group page: final ranking, grader verdict, editor, lease.

Loaded with two queries (the grader's latest grading, the heads of the
chains the user sees) on top of the group page's own; what the user may not
see yet (blind review, other annotators' rankings under k-way overlap) is
left out by `rankings.visible_ranking`, before any template sees it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grading.rankings import InvalidRanking, tier_lines, validate_ranking
from webapp import rankings
from webapp.advantages.config import AdvantageConfig, parse_advantage_config
from webapp.advantages.selectors import ranking_advantage_rows
from webapp.annotation import editor
from webapp.models import Annotation, AnnotationPolicy, Group
from webapp.roles import may_annotate

UNRANKED = "Rank every passing trajectory to see the redistribution; until then GRPO advantages stand."


def preview_ranking(tiers, flags, verdicts, trajectories) -> tuple[rankings.FinalRanking | None, str]:
    """The ranking a preview computes advantages for, or None and why not. `verdicts` overrides
    the test verdicts of the group's `trajectories`."""
    passing = rankings.corrected_passing({t.trajectory_id: t.passed for t in trajectories}, verdicts)
    ranked = {tid for tier in tiers for tid in tier}
    if set(passing) - ranked:
        return None, UNRANKED
    try:
        tiers = validate_ranking(tiers, passing)
    except InvalidRanking as error:
        return None, f"Not a ranking of this group: {error}."
    return rankings.FinalRanking(tiers=tiers, flags={tid: tuple(names) for tid, names in flags.items()},
                                 scores=None, source="preview", grading_id=None, grader_version="",
                                 verdicts=verdicts), ""


@dataclass
class RankingPage:
    group: Group
    seen: rankings.VisibleRanking  # the rankings as this user may see them
    can_edit: bool
    advantages: dict[str, dict]
    start: editor.Start
    based_on_version: int
    grading_id: int | None
    error: str = ""
    editor: editor.Editor | None = None
    tau: float | None = None
    tau_label: str = ""
    final_lines: list = field(default_factory=list)
    start_preview: editor.Preview | None = None

    @classmethod
    def load(cls, user, group: Group, trajectories, *, submitted=None, error: str = "") -> RankingPage:
        """`group` comes from review.selectors.group_for_page (policy, lease and the user's
        ranking annotated); `submitted` is a refused RankingInput to show again."""
        seen = rankings.visible_ranking(rankings.Viewer(user), group, ranked=group.my_version is not None)
        page = cls(
            group=group, seen=seen, can_edit=may_annotate(user),
            advantages={r["trajectory_id"]: r for r in ranking_advantage_rows(group, seen.final, trajectories)},
            start=editor.Start(), based_on_version=0, grading_id=None, error=error,
        )
        page._choose_start(submitted, user)
        page._preview_start(trajectories)
        page._agreement(group)
        page.final_lines = tier_lines(seen.final.tiers) if seen.final else []
        return page

    @property
    def policy(self) -> AnnotationPolicy:
        return self.seen.policy

    @property
    def grader(self) -> rankings.FinalRanking | None:
        """None when there is none or it is hidden."""
        return self.seen.grader

    @property
    def final(self) -> rankings.FinalRanking | None:
        """None when there is none or it is hidden."""
        return self.seen.final

    @property
    def final_head(self) -> Annotation | None:
        return self.seen.final_head

    @property
    def own_head(self) -> Annotation | None:
        return self.seen.own_head

    @property
    def chain_head(self) -> Annotation | None:
        """The head of the chain this user's saves go to."""
        return self.own_head if self.policy.independent else self.final_head

    def _choose_start(self, submitted, user) -> None:
        head = self.chain_head
        self.based_on_version = head.version if head is not None else 0
        self.grading_id = self.grader.grading_id if self.grader is not None else None
        if submitted is not None:
            self.start = submitted.start()
            self.based_on_version = submitted.based_on_version
            self.grading_id = submitted.grading_id
        elif head is not None and head.tiers is not None:
            mine = " (yours)" if head.user_id == user.pk else ""
            self.start = editor.Start(tiers=head.tiers, flags=head.flags, rationales=head.rationales,
                                    group_rationale=head.group_rationale, verdicts=head.verdicts,
                                    label=f"version {head.version} by {head.user.get_username()}{mine}")
        elif not self.policy.independent and self.final is not None:
            label = ("the grader's ranking" if self.final.source == "grader"
                     else f"version {self.final.version} by {self.final.author}")
            self.start = editor.Start(tiers=self.final.tiers, flags=self.final.flags, verdicts=self.final.verdicts,
                                    label=label)

    def _preview_start(self, trajectories) -> None:
        if not self.can_edit or not trajectories:
            return
        ranking, problem = preview_ranking(self.start.tiers, self.start.flags, self.start.verdicts, trajectories)
        rows = ranking_advantage_rows(self.group, ranking, trajectories)
        self.start_preview = editor.preview(rows, self.start.tiers, problem=problem)

    @property
    def config(self) -> AdvantageConfig:
        return parse_advantage_config(self.group.batch.advantage_config)

    def _agreement(self, group) -> None:
        if self.grader is None:
            return
        if group.my_tiers:
            self.tau = editor.tau(group.my_tiers, self.grader.tiers)
            self.tau_label = f"your ranking (version {group.my_version}) vs the grader"
        elif self.final is not None and self.final.source == "human":
            self.tau = editor.tau(self.final.tiers, self.grader.tiers)
            self.tau_label = f"final ranking (version {self.final.version}) vs the grader"

    def attach(self, columns) -> None:
        """Put the grader's verdict in each column and build the editor over them."""
        editor.grade_cells(columns, self.grader, hidden=self.grader is None)
        if self.can_edit:
            self.editor = editor.build_editor(columns, self.start, based_on_version=self.based_on_version,
                                            grading_id=self.grading_id, grader=self.grader, error=self.error)

    @property
    def overrides(self) -> list[tuple[str, bool, str]]:
        """The final ranking's verdict overrides as (trajectory id, passes now, reason)."""
        if self.final is None:
            return []
        return [(tid, v["passed"], v["reason"]) for tid, v in sorted(self.final.verdicts.items())]

    @property
    def blind_hidden(self) -> bool:
        return self.seen.hide_grader

    @property
    def blind_revealed(self) -> bool:
        return self.policy.blind and self.group.my_version is not None and self.grader is not None

    @property
    def history_size(self) -> int:
        return max((h.version for h in (self.final_head, self.own_head) if h is not None), default=0)
