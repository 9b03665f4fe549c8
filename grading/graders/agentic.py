"""The agentic LLM grader: a tool-calling loop over a group's workspace, many groups at once.

Every model turn is one JSON action, constrained by a JSON schema through the backend's
structured output: a workspace tool call, or the final `submit_ranking`. When the turn
or token budget is spent the schema narrows to the submission alone. A submission is
validated (a permutation of the passing labels, ties allowed, a rationale each, flags
from rankings.FLAGS); an invalid one gets ONE repair turn with the error, then the grade
fails visibly (a GraderError; the group keeps its GRPO advantages).

`rank_many` advances all groups in lockstep: each turn is one batched backend call over
every conversation still running; finished ones drop out. With `k > 1` each group is
graded k times under different label shuffles and the runs are merged by Borda count;
their mean pairwise Kendall tau is the grade's confidence (position-bias control).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction

from grading.actions import action_char_bound, action_schema, submission_schema
from grading.agreement import kendall_tau, positions
from grading.backends import Backend, Reply, Sampling, load_backend
from grading.cases import Grade, GraderError, GroupCase
from grading.graders.base import Grader
from grading.rankings import InvalidRanking
from grading.tool_limits import Caps
from grading.workspace import DEFAULT_MAX_TURNS, SUBMIT, SYSTEM_PROMPT, Workspace
from grading.workspace_code import CodeTools


@dataclass(frozen=True)
class Budget:
    """Per run: model turns (the submission included; a repair turn comes on top), the
    most tokens its conversation may hold, the length bound of each rationale, and how
    many tool calls must come before a submission is allowed (a guard against graders
    that rank without looking; benchmarks use it to fix the number of turns)."""

    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens: int = 32768
    rationale_chars: int = 400
    min_turns: int = 0

    def __post_init__(self):
        if self.max_turns < 1 or self.max_tokens < 1 or self.rationale_chars < 8:
            raise ValueError("max_turns and max_tokens must be positive, rationale_chars >= 8")
        if not 0 <= self.min_turns < self.max_turns:
            raise ValueError("min_turns must be in [0, max_turns)")

    def describe(self) -> str:
        described = f"b{self.max_turns}x{self.max_tokens}r{self.rationale_chars}"
        return described + (f"m{self.min_turns}" if self.min_turns else "")


class GradingFailed(GraderError):
    """A grade that failed after the model ran: carries what it did, for display."""


@dataclass
class _Run:
    group_index: int
    index: int
    seed: int
    workspace: Workspace
    messages: list[dict]
    log: list[dict]
    mode: str = "any"  # "any" action, "forced" submission, "repair" submission
    turns: int = 0
    repaired: bool = False
    usage: Counter = field(default_factory=Counter)
    context_tokens: int = 0
    outcome: tuple | GraderError | None = None


class AgenticGrader(Grader):
    name = "agentic"
    uses_code = True

    def __init__(self, backend: Backend | str, *, backend_options: Mapping | None = None,
                 sampling: Sampling | Mapping | None = None,
                 budget: Budget | Mapping | None = None, k: int = 1, seed: int = 0,
                 caps: Caps | Mapping | None = None, name: str = "agentic"):
        if isinstance(backend, str):
            backend = load_backend(backend, **dict(backend_options or {}))
        self.backend = backend
        self.sampling = _coerce(Sampling, sampling)
        self.budget = _coerce(Budget, budget)
        self.caps = _coerce(Caps, caps)
        if k < 1:
            raise ValueError("k must be at least 1")
        self.k = k
        self.seed = seed
        self.name = name
        prompt = json.dumps([SYSTEM_PROMPT, asdict(self.caps), self.budget.rationale_chars])
        self.prompt_hash = hashlib.sha256(prompt.encode()).hexdigest()[:8]
        self.version = (f"{backend.model_id}:p{self.prompt_hash}:{self.sampling.describe()}"
                        f":{self.budget.describe()}:k{k}")

    def rank(self, group: GroupCase) -> Grade:
        result = self.rank_many([group])[0]
        if isinstance(result, GraderError):
            raise result
        return result

    def rank_many(self, groups: Sequence[GroupCase]) -> list[Grade | GraderError]:
        started = time.perf_counter()
        results: list[Grade | GraderError | None] = [None] * len(groups)
        runs: dict[int, list[_Run]] = {}
        for gi, group in enumerate(groups):
            if len(group.passing) < 2:
                results[gi] = self._trivial(group)
            else:
                runs[gi] = [self._start(gi, group, r) for r in range(self.k)]
        active = [run for group_runs in runs.values() for run in group_runs]
        done_at: dict[int, float] = {}
        step = 0
        while active:
            schemas = [self._schema(run) for run in active]
            bound = max(self._token_bound(run) for run in active)
            sampling = replace(self.sampling, seed=self.sampling.seed + step,
                               max_new_tokens=self.sampling.max_new_tokens or bound)
            try:
                replies = self.backend.generate([run.messages for run in active], schemas, sampling)
            except GraderError as error:
                replies = [error] * len(active)
            for run, schema, reply in zip(active, schemas, replies, strict=True):
                self._advance(run, schema, reply)
                if run.outcome is not None:
                    done_at[run.group_index] = time.perf_counter()
            active = [run for run in active if run.outcome is None]
            step += 1
        for gi, group_runs in runs.items():
            results[gi] = self._grade(group_runs, done_at[gi] - started)
        return results

    # --- one run ---------------------------------------------------------------------------

    def _start(self, gi: int, group: GroupCase, index: int) -> _Run:
        seed = run_seed(self.seed, group.group_id, index)
        # Each run's code tools keep their own budget: k runs of a group stay independent.
        code = CodeTools(group.code, self.caps) if group.code is not None else None
        workspace = Workspace(group, seed, self.caps, code=code)
        messages = workspace.initial_messages(max_turns=self.budget.max_turns,
                                              prior=self._prior(workspace))
        run = _Run(gi, index, seed, workspace, messages, [])
        if self._budget_spent(run, "".join(m["content"] for m in messages)):
            run.mode = "forced"
            messages[-1]["content"] += "\n\n" + _FORCED
        run.log.append({"run": index, "event": "start", "group": group.group_id, "seed": seed,
                        "labels": dict(workspace.mapping)})
        run.log += [{"run": index, "turn": 0, **m} for m in messages]
        return run

    def _schema(self, run: _Run) -> dict:
        if run.mode == "any":
            return action_schema(run.workspace, self.budget.rationale_chars,
                                 submit=run.turns >= self.budget.min_turns)
        return submission_schema(run.workspace, self.budget.rationale_chars)

    def _token_bound(self, run: _Run, *, submit_only: bool | None = None) -> int:
        if submit_only is None:
            submit_only = run.mode != "any"
        chars = action_char_bound(run.workspace, self.budget.rationale_chars,
                                  submit_only=submit_only)
        return chars + 8  # each token covers at least one ASCII character; + the stop token

    def _budget_spent(self, run: _Run, added: str) -> bool:
        """Whether the next turn must submit: the turns are spent, or, after the text
        `added`, one more tool turn (the longest reply, a full tool output at an estimated
        2 characters a token) and then a submission might not fit the token budget or the
        model's context."""
        worst = (run.context_tokens + self.backend.count_tokens(added)
                 + self._token_bound(run, submit_only=False) + self.caps.output_chars // 2
                 + self._token_bound(run, submit_only=True) + 3 * _TEMPLATE_TOKENS)
        limit = min(self.budget.max_tokens, self.backend.max_context or self.budget.max_tokens)
        return run.turns >= self.budget.max_turns - 1 or worst > limit

    def _advance(self, run: _Run, schema: dict, reply: Reply | GraderError) -> None:
        tools_only = run.mode == "any" and run.turns < self.budget.min_turns
        run.turns += 1
        if isinstance(reply, GraderError):
            self._finish(run, reply)
            return
        run.usage.update(prompt_tokens=reply.prompt_tokens,
                         completion_tokens=reply.completion_tokens, turns=1)
        # A server that reports no usage leaves a count (or estimate) from the text.
        run.context_tokens = (reply.prompt_tokens + reply.completion_tokens or sum(
            self.backend.count_tokens(m["content"]) + _TEMPLATE_TOKENS for m in run.messages))
        run.messages.append({"role": "assistant", "content": reply.text})
        action, problem = decode_action(reply, schema)
        run.log.append({"run": run.index, "turn": run.turns, "role": "assistant",
                        "content": reply.text, "action": action,
                        "schema": "tools" if tools_only else run.mode,
                        "tokens": reply.completion_tokens})
        if run.mode != "any" or (action or {}).get("tool") == SUBMIT:
            self._submission(run, action, problem)
            return
        output = f"error: not a valid action: {problem}" if problem else run.workspace.run(action)
        if self._budget_spent(run, output):
            run.mode = "forced"
            note = _FORCED
        else:
            note = f"[{self.budget.max_turns - run.turns} turns left]"
        self._say(run, f"{output}\n\n{note}", kind="tool", tool=(action or {}).get("tool"))

    def _submission(self, run: _Run, action: dict | None, problem: str | None) -> None:
        if problem is None:
            try:
                self._finish(run, self._accepted(run, run.workspace.submission(action)))
                return
            except InvalidRanking as error:
                problem = str(error)
        if run.repaired:
            self._finish(run, GraderError(
                f"invalid ranking after the repair turn: {problem}", permanent=True))
            return
        run.repaired, run.mode = True, "repair"
        self._say(run, f"Your submission was rejected: {problem}. Reply now with a corrected "
                       "submit_ranking; this is the last chance.", kind="repair")

    def _prior(self, workspace: Workspace) -> str:
        """Text shown in the first user turn after the trajectories: none here; the hybrid
        grader's prior ranking."""
        return ""

    def _accepted(self, run: _Run, outcome: tuple) -> tuple:
        """A valid submission (tiers, rationales, flags, in ids) as the run's result: as
        submitted here; the hybrid grader reverts overturns of its prior given no reason."""
        return outcome

    def _say(self, run: _Run, content: str, *, kind: str, tool: str | None = None) -> None:
        """A user message to the model; the transcript shows a tool's output as role "tool"."""
        run.messages.append({"role": "user", "content": content})
        entry = {"run": run.index, "turn": run.turns, "content": content}
        if kind == "tool":
            entry.update(role="tool", tool=tool)
        else:
            entry.update(role="user", kind=kind)
        run.log.append(entry)

    def _finish(self, run: _Run, outcome: tuple | GraderError) -> None:
        run.outcome = outcome
        entry = {"run": run.index, "event": "result"}
        if isinstance(outcome, GraderError):
            entry["error"] = str(outcome)
        else:
            entry["tiers"] = [list(tier) for tier in outcome[0]]
        run.log.append(entry)

    # --- grades ----------------------------------------------------------------------------

    def _grade(self, runs: list[_Run], latency: float) -> Grade | GraderError:
        transcript = [entry for run in runs for entry in run.log]
        usage = dict(sum((run.usage for run in runs), Counter()), runs=len(runs))
        ok = [run.outcome for run in runs if not isinstance(run.outcome, GraderError)]
        if not ok:
            first = runs[0].outcome
            return GradingFailed(f"group {runs[0].workspace.group.group_id}: {first}",
                                 permanent=first.permanent, transcript=transcript, usage=usage)
        confidence = scores = None
        tiers, rationales, flags = ok[0]
        if len(ok) > 1:
            tiers, points = borda([outcome[0] for outcome in ok])
            agreements = [run_agreement(a[0], b[0]) for i, a in enumerate(ok) for b in ok[i + 1:]]
            confidence = sum(agreements) / len(agreements)
            best = max(range(len(ok)), key=lambda i: run_agreement(ok[i][0], tiers))
            rationales = ok[best][1]
            flags = _majority_flags([outcome[2] for outcome in ok])
            top = max(len(points) - 1, 1)
            scores = {tid: float(p) / top for tid, p in points.items()}
            transcript.append({"event": "aggregate", "method": "borda",
                               "runs": [[list(t) for t in o[0]] for o in ok],
                               "points": {tid: float(p) for tid, p in points.items()},
                               "agreement": confidence, "failed_runs": len(runs) - len(ok)})
        return Grade(tiers=tiers, rationales=rationales, grader=self.name, version=self.version,
                     flags=flags, scores=scores, confidence=confidence, usage=usage,
                     latency_s=latency, transcript=tuple(transcript))

    def _trivial(self, group: GroupCase) -> Grade:
        passing = [t.trajectory_id for t in group.passing]
        reason = "fewer than two passing trajectories: nothing to rank, no model call"
        return Grade(tiers=tuple((tid,) for tid in passing),
                     rationales={tid: "the only passing trajectory" for tid in passing},
                     grader=self.name, version=self.version,
                     transcript=({"event": "skipped", "reason": reason},))


def run_seed(seed: int, group_id: str, index: int) -> int:
    """The workspace labelling seed of run `index` of a grader seeded `seed` on a group; the
    SFT export labels its examples as run 0 does."""
    digest = hashlib.sha256(f"{seed}:{group_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


_FORCED = "[Budget spent: your next reply must be submit_ranking.]"
_TEMPLATE_TOKENS = 32  # a message's chat-template tokens and turn note, generously


def decode_action(reply: Reply, schema: Mapping) -> tuple[dict | None, str | None]:
    """The reply as a JSON object, and what is wrong with it (None when it fits the schema)."""
    cut = " (the reply was cut at the token limit)" if reply.finish_reason == "length" else ""
    try:
        action = json.loads(reply.text)
    except ValueError as error:
        return None, f"not JSON: {error}{cut}"
    if not isinstance(action, dict):
        return None, "not a JSON object"
    errors = schema_errors(action, schema)
    return action, ("; ".join(errors[:3]) + cut) if errors else None


def schema_errors(value, schema: Mapping, where: str = "$") -> list[str]:
    """Check `value` against the subset of JSON Schema the grader's action schemas use."""
    if "anyOf" in schema:
        branches = [schema_errors(value, s, where) for s in schema["anyOf"]]
        if any(not b for b in branches):
            return []
        return min(branches, key=len)
    if "const" in schema and value != schema["const"]:
        return [f"{where}: expected {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} is not one of {', '.join(map(str, schema['enum']))}"]
    kind = schema.get("type")
    checks = {"object": dict, "array": list, "string": str, "integer": int}
    if kind and (not isinstance(value, checks[kind]) or isinstance(value, bool)):
        return [f"{where}: expected {kind}"]
    errors = []
    if kind == "object":
        errors += [f"{where}: missing {k!r}" for k in schema.get("required", ()) if k not in value]
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            errors += [f"{where}: unexpected {k!r}" for k in value if k not in properties]
        for key, sub in properties.items():
            if key in value:
                errors += schema_errors(value[key], sub, f"{where}.{key}")
    elif kind == "array":
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", math.inf):
            errors.append(f"{where}: {len(value)} items, outside "
                          f"[{schema.get('minItems', 0)}, {schema.get('maxItems', 'inf')}]")
        for i, item in enumerate(value):
            errors += schema_errors(item, schema.get("items", {}), f"{where}[{i}]")
    elif kind == "string" and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{where}: does not match {schema['pattern']}")
    elif kind == "integer" and not (schema.get("minimum", -math.inf) <= value
                                    <= schema.get("maximum", math.inf)):
        errors.append(f"{where}: {value} out of range")
    return errors


def borda(rankings: Sequence[Sequence[Sequence[str]]]) -> tuple[tuple[tuple[str, ...], ...], dict]:
    """Merge rankings with ties by Borda count: tiers of equal mean points, best first.

    Points of an id = positions below it, tied ids sharing the mean of the positions they
    occupy; exact fractions, so equal means tie exactly.

    >>> borda([[["a"], ["b"], ["c"]], [["b"], ["a"], ["c"]]])[0]
    (('a', 'b'), ('c',))
    """
    points: dict[str, Fraction] = {}
    for tiers in rankings:
        n, position = sum(len(t) for t in tiers), 0
        for tier in tiers:
            mean_position = Fraction(2 * position + len(tier) - 1, 2)
            for tid in tier:
                points[tid] = points.get(tid, Fraction(0)) + (n - 1 - mean_position)
            position += len(tier)
    points = {tid: p / len(rankings) for tid, p in points.items()}
    levels = sorted(set(points.values()), reverse=True)
    tiers = tuple(tuple(sorted(t for t, p in points.items() if p == level)) for level in levels)
    return tiers, points


def run_agreement(a: Sequence[Sequence[str]], b: Sequence[Sequence[str]]) -> float:
    """Kendall tau-b between two runs' rankings of the same ids; where tau is undefined
    (a run ties everything), 1 when the runs are the same and 0 otherwise."""
    tau = kendall_tau(a, b)
    if tau is not None:
        return tau
    return 1.0 if positions(a) == positions(b) else 0.0


def _majority_flags(runs: Sequence[Mapping[str, Sequence[str]]]) -> dict[str, tuple[str, ...]]:
    counts = Counter((tid, flag) for flags in runs for tid, names in flags.items()
                     for flag in set(names))
    merged: dict[str, list[str]] = {}
    for (tid, flag), n in sorted(counts.items()):
        if 2 * n > len(runs):
            merged.setdefault(tid, []).append(flag)
    return {tid: tuple(names) for tid, names in merged.items()}


def _coerce(kind, value):
    if value is None:
        return kind()
    return value if isinstance(value, kind) else kind(**value)
