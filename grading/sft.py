"""Grader SFT data from human-verified rankings: the one-shot conversation, preference pairs,
the split by task and near-duplicate groups. Plain data in and out; the export
(webapp/exports/sft.py) reads the database and writes the files.

An example is the agentic grader's first turn answered at once: system and user are the
workspace's `initial_messages` (what the grader sees), and the assistant reply is the
`submit_ranking` action `render_submission` writes, checked against the grader's own answer
schema and `Workspace.submission`, so it is an answer the grader may give.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Mapping, Sequence

from grading.actions import submission_schema
from grading.agreement import positions
from grading.cases import GroupCase
from grading.graders.agentic import Budget, run_seed, schema_errors
from grading.rankings import InvalidRanking
from grading.workspace import Workspace, render_submission

RATIONALE_CHARS = Budget().rationale_chars
TRAIN, VALIDATION = "train", "validation"
MISSING_RATIONALE = "a passing trajectory has no rationale"

Tiers = Sequence[Sequence[str]]


def workspace_for(group: GroupCase, seed: int) -> Workspace:
    """`group` labelled as the agentic grader seeded `seed` labels it in its first run."""
    return Workspace(group, run_seed(seed, group.group_id, 0))


def grader_text(text: str, limit: int = RATIONALE_CHARS) -> str:
    """`text` in the alphabet the grader's answer schema allows (grading/actions.py `TEXT`):
    one line of printable ASCII without '"' or '\\', at most `limit` characters.

    Accents are dropped, dashes and curly quotes become '-' and "'", other characters
    outside the alphabet become spaces; a longer text is cut at a word and ends in '...'.

    >>> grader_text('Café "fix" — see a\\\\b\\n  ok')
    "Cafe 'fix' - see a/b ok"
    >>> grader_text("one two three", limit=10)
    'one two...'
    """
    out = []
    for char in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(char):
            continue
        if char == '"' or unicodedata.category(char) in ("Pi", "Pf"):
            out.append("'")
        elif char == "\\":
            out.append("/")
        elif " " < char <= "~":
            out.append(char)
        elif unicodedata.category(char) == "Pd":
            out.append("-")
        else:
            out.append(" ")
    text = " ".join("".join(out).split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 2)
    return text[:cut if cut > limit // 2 else limit - 3].rstrip() + "..."


def answer(workspace: Workspace, tiers: Tiers, rationales: Mapping[str, str],
           flags: Mapping[str, Sequence[str]]) -> dict:
    """The assistant message that submits `tiers` (trajectory ids) with their rationales, in
    the grader's alphabet, and flags. Raises InvalidRanking when it is not an answer the
    grader may give (a rationale missing, more flags than the schema allows)."""
    texts = {tid: grader_text(rationales.get(tid, "")) for tier in tiers for tid in tier}
    if not all(texts.values()):
        raise InvalidRanking(MISSING_RATIONALE)
    content = render_submission(workspace, tiers, texts, flags)
    action = json.loads(content)
    errors = schema_errors(action, submission_schema(workspace, RATIONALE_CHARS))
    if errors:
        raise InvalidRanking(f"not an answer the grader may give: {errors[0]}")
    workspace.submission(action)
    return {"role": "assistant", "content": content}


def under_test_verdicts(tiers: Tiers, rationales: Mapping[str, str], verdicts: Mapping[str, Mapping],
                        passing: Sequence[str]) -> tuple[Tiers, dict[str, str]]:
    """A human ranking made under corrected test verdicts, as the grader can answer it: the
    grader ranks what the tests passed (`passing`). Ids the tests failed and the human passed
    leave the ranking; ids the tests passed and the human failed join it as one last tier,
    their rationale the human's reason. `verdicts`: id -> {"passed": bool, "reason": text}.

    >>> under_test_verdicts([["t3"], ["t2"]], {"t2": "ok", "t3": "best"},
    ...                     {"t1": {"passed": False, "reason": "edits the test"},
    ...                      "t3": {"passed": True, "reason": "flaky test"}}, ["t1", "t2"])
    ((('t2',), ('t1',)), {'t2': 'ok', 't1': 'the tests pass, but it does not fix the task: edits the test'})
    """
    tested = set(passing)
    kept = tuple(kept for kept in (tuple(tid for tid in tier if tid in tested) for tier in tiers) if kept)
    failed = tuple(tid for tid in passing if tid in verdicts and not verdicts[tid]["passed"])
    texts = {tid: rationales.get(tid, "") for tier in kept for tid in tier}
    texts.update({tid: f"the tests pass, but it does not fix the task: {verdicts[tid]['reason']}" for tid in failed})
    return (*kept, failed) if failed else kept, texts


def same_ranking(a: Tiers, b: Tiers) -> bool:
    """Whether two rankings order the same ids the same way (order inside a tier aside)."""
    return positions(a) == positions(b)


def swapped(tiers: Tiers) -> tuple[tuple[str, ...], ...] | None:
    """`tiers` with the first id of the best tier and the last of the worst exchanged: a
    ranking that reverses one pair the original orders strictly. None when all are tied.

    >>> swapped([["a"], ["b", "c"], ["d"]])
    (('d',), ('b', 'c'), ('a',))
    """
    if len(tiers) < 2:
        return None
    best, worst = tiers[0][0], tiers[-1][-1]
    exchange = {best: worst, worst: best}
    return tuple(tuple(exchange.get(tid, tid) for tid in tier) for tier in tiers)


def split_of(task_key: str, *, seed: int, validation_share: float) -> str:
    """TRAIN or VALIDATION for a task, from a hash of the seed and the task alone: a task's
    side never depends on which other tasks an export holds, so it stays on one side across
    batches exported with the same seed."""
    digest = hashlib.sha256(f"{seed}:{task_key}".encode()).digest()
    return VALIDATION if int.from_bytes(digest[:8], "big") / 2 ** 64 < validation_share else TRAIN


def patch_fingerprint(patch: str) -> str:
    """sha256 of a patch's file headers and changed lines, whitespace runs collapsed: the same
    for one change whatever its hunk offsets, context lines, index lines or spacing."""
    changed = (" ".join(line.split()) for line in patch.splitlines() if line.startswith(("+", "-")))
    return hashlib.sha256("\n".join(changed).encode()).hexdigest()


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two groups' sets of passing patch fingerprints."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


class NearDuplicates:
    """Keeps the first of each set of near-duplicate groups: same task, and passing patches
    whose fingerprint sets are at least `threshold` similar. Feed groups in export order."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self._kept: dict[str, list[tuple[str, frozenset[str]]]] = {}

    def twin(self, group_id: str, task_key: str, fingerprints: frozenset[str]) -> str | None:
        """The kept group `group_id` nearly duplicates; None, and it is kept, when none."""
        kept = self._kept.setdefault(task_key, [])
        for other, prints in kept:
            if similarity(fingerprints, prints) >= self.threshold:
                return other
        kept.append((group_id, fingerprints))
        return None
