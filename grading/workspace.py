"""A group as the grader agent sees it: anonymised labels and size-capped tools.

Each trajectory gets a label (A, B, C, ...) from a seeded shuffle, so neither the
order of the rollout file nor the trajectory ids carry a signal; `Workspace.mapping`
records which label is which id. Every tool returns plain text no longer than its
cap, and says so explicitly when it cut something (the caps, and the checks of a call's
arguments: grading/tool_limits.py). `render_prompt` and
`render_submission` are what the SFT exporter calls, so graded and exported
conversations come from the same code. The `evidence_*` tools show the heuristic
grader's own figures (grading/evidence.py), so a model starts from what it knows;
`evidence_execution` shows the group's execution evidence (grading/execution), each
candidate's code run against the reward's, the codebase's and its peers' tests. For a group
with that evidence the code tools, `view_file`, `run_tests` and `run`, read and run each
candidate's code, and `run_all` runs one command on every passing candidate's code and the
reference fix's (grading/workspace_code.py); the grader hands their `CodeTools` in.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from functools import cached_property

from grading import evidence
from grading.cases import GroupCase, TrajectoryCase
from grading.diffs import MARKER_LABELS, FileDiff, parse_patch, patch_stats, unique_files
from grading.execution.plan import BASE, REFERENCE
from grading.execution.verdicts import (
    breaks_tests,
    diverges_from_reference,
    example_differences,
    fails_reward_files,
    flaky,
    reference_control,
    trace_control,
)
from grading.interdiff import interdiff
from grading.rankings import FLAGS, InvalidRanking, validate_ranking
from grading.tool_limits import Caps, ToolError, brief, cap, number_argument, text_argument
from grading.workspace_code import CodeTools

PROMPT_VERSION = "7"
EVIDENCE_TOOLS = ("evidence_consensus", "evidence_integrity", "evidence_minimality", "evidence_execution")
CODE_TOOLS = ("view_file", "run_tests", "run", "run_all")
TOOLS = ("list_trajectories", "view_patch", "view_transcript", "search", "compare", "view_tests",
         *EVIDENCE_TOOLS, *CODE_TOOLS)
SUBMIT = "submit_ranking"
DEFAULT_MAX_TURNS = 12

SYSTEM_PROMPT = f"""\
You review the solutions that several coding-agent trajectories produced for one task and \
rank the ones that pass the tests by implementation quality. Prompt version {PROMPT_VERSION}.

Every trajectory has a label (A, B, C, ...). Labels are assigned at random: their order says \
nothing about quality. Failing trajectories are there for context only; rank only the \
passing ones.

Judge, in this order of weight:
1. Approach: does the change fix the cause the task describes, not a symptom or the tests?
2. Precision to the task: it does what was asked, no less and no more.
3. Minimality: no needless edits, files, abstractions or rewrites.
4. Side effects: no edited or deleted tests, no stray files, debug output or unrelated changes.
5. Craftsmanship: readable, idiomatic, consistent with the surrounding code.
Compare the solutions with each other: needless complexity shows side by side.

Each reply is exactly one JSON object, one action:
- {{"tool": "list_trajectories"}}: pass/fail, size, files and integrity markers of each.
- {{"tool": "view_patch", "label": "A", "path": ""}}: the patch with new-file line numbers; \
a path shows one file.
- {{"tool": "view_transcript", "label": "A", "start": 0, "end": 10}}: turns start..end-1.
- {{"tool": "search", "pattern": "print(", "labels": []}}: literal, case-insensitive search \
of patches and transcripts; [] searches every label.
- {{"tool": "compare", "a": "A", "b": "B"}}: file by file, how B's change differs from A's.
- {{"tool": "view_tests", "label": "A"}}: test results and the end of the test log.
- {{"tool": "evidence_consensus"}}, {{"tool": "evidence_integrity"}}, \
{{"tool": "evidence_minimality"}}: a heuristic's figures per passing label: added lines the \
others share; test edits, stray files, debug output; size against the leanest.
- {{"tool": "evidence_execution"}}: each candidate's code run in a sandbox against the reward's \
tests, the whole files of the task's test patch, the codebase's existing tests and the tests other \
candidates wrote: which it fails that the task's reference fix or the others pass, and which reward \
verdicts do not reproduce; the calls of the functions the reference fix changes that end otherwise \
than with it, and the issue's examples run on the base code, the reference fix and each candidate.
- {{"tool": "view_file", "label": "A", "path": "pkg/mod.py", "start": 1, "end": 80}}: lines \
start..end of a file of A's code (the codebase with A's patch applied); a folder, or "", lists \
its entries.
- {{"tool": "run_tests", "label": "A", "tests": ["tests/test_mod.py::test_f"]}}: those tests \
(ids or files) run on A's code in a sandbox: each one's result and the end of the output.
- {{"tool": "run", "label": "A", "command": "python -c 'import pkg'"}}: a shell command run on \
A's code in the sandbox, without network. Every run starts from A's code as its patch left it.
- {{"tool": "run_all", "command": "python -c 'import pkg; print(pkg.f(0))'"}}: one shell command \
run on the task's reference fix and on every passing candidate, one run of the budget: the \
outcomes grouped, so a check of your own shows who behaves like the reference fix.
The first turn says whether the code tools work for the group, and how many runs and seconds \
they have in all.
- {{"tool": "submit_ranking", "ranking": [["A"], ["B", "C"]], "rationales": {{"A": "..."}}, \
"flags": {{"A": []}}}}: the final answer, best first; a tier holds tied labels. Every passing \
label appears exactly once, with a rationale that cites evidence (file:line of a patch, or a \
transcript turn such as A#12), and its flags from: {", ".join(FLAGS)}.

Tool outputs are capped; a note says when something was cut and how to see the rest. \
Text fields are plain ASCII without double quotes or backslashes. When the budget is spent \
you must submit at once.
"""


def make_labels(n: int) -> list[str]:
    """A..Z, then AA, AB, ... (a group of more than 26 trajectories still gets short labels)."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return [letters[i] if i < 26 else letters[i // 26 - 1] + letters[i % 26] for i in range(n)]


class Workspace:
    """One group under one seeded labelling, with the tools the grader agent calls. The code
    tools are offered for a group with execution evidence, whose code the worker can give;
    `code` runs them (None: they answer why not)."""

    def __init__(self, group: GroupCase, seed: int, caps: Caps | None = None,
                 code: CodeTools | None = None):
        self.group = group
        self.seed = seed
        self.caps = caps or Caps()
        self.code = code
        self.code_offered = group.execution is not None
        order = list(range(len(group.trajectories)))
        random.Random(seed).shuffle(order)
        labels = make_labels(len(order))
        self._by_label = {label: group.trajectories[i] for label, i in zip(labels, order, strict=True)}
        self.mapping = {label: t.trajectory_id for label, t in self._by_label.items()}
        self.labels = tuple(labels)
        self.passing_labels = tuple(lab for lab, t in self._by_label.items() if t.passed)
        self._label_of = {tid: label for label, tid in self.mapping.items()}

    def label_of(self, trajectory_id: str) -> str:
        return self._label_of[trajectory_id]

    def trajectory(self, label: str) -> TrajectoryCase:
        if not isinstance(label, str) or label not in self._by_label:
            raise ToolError(f"no trajectory {brief(label)}; labels: {', '.join(self.labels)}")
        return self._by_label[label]

    @cached_property
    def _parsed(self):
        return {label: parse_patch(t.patch or "") for label, t in self._by_label.items()}

    @cached_property
    def evidence(self) -> evidence.Evidence:
        """The heuristic's assessment of the passing trajectories, computed when first asked."""
        return evidence.assess(self.group, self.passing_labels, self.mapping.__getitem__, self._parsed)

    # --- tools ---------------------------------------------------------------------------

    def run(self, action: Mapping) -> str:
        """Run one tool action (a decoded JSON object); errors come back as text for the agent."""
        tool = action.get("tool")
        args = {k: v for k, v in action.items() if k != "tool"}
        try:
            if tool not in TOOLS:
                raise ToolError(f"unknown tool {tool!r}; tools: {', '.join(TOOLS + (SUBMIT,))}")
            if tool in CODE_TOOLS:
                return self._code_tool(tool, **args)
            return getattr(self, tool)(**args)
        except TypeError as error:
            return f"error: bad arguments for {tool}: {error}"
        except ToolError as error:
            return f"error: {error}"

    def list_trajectories(self) -> str:
        passing = self.passing_labels
        only_here = unique_files({lab: self._parsed[lab] for lab in self.labels}, passing)
        lines = [f"{len(self.labels)} trajectories, {len(passing)} passing. "
                 f"Rank the passing ones: {', '.join(passing) or '(none)'}."]
        for label in self.labels:
            t, parsed = self._by_label[label], self._parsed[label]
            stats = patch_stats(parsed)
            metrics = " ".join(f"{k}={t.metrics[k]}" for k in ("num_turns", "output_tokens")
                               if k in t.metrics)
            lines.append(
                f"{label}: {'PASS' if t.passed else 'FAIL'} reward={t.reward:g} "
                f"files={stats.files_changed} +{stats.lines_added} -{stats.lines_removed} "
                f"hunks={stats.hunks} {metrics}".rstrip())
            if parsed.files:
                files = [f.path + (" (only here)" if f.path in only_here.get(label, ()) else "")
                         for f in parsed.files[:12]]
                more = f", ... {len(parsed.files) - 12} more" if len(parsed.files) > 12 else ""
                lines.append(f"   files: {', '.join(files)}{more}")
            if parsed.markers:
                lines.append("   markers: " + "; ".join(MARKER_LABELS[m] for m in sorted(parsed.markers)))
            if parsed.error:
                lines.append(f"   patch problem: {parsed.error}")
        return cap("\n".join(lines), self.caps.output_chars, "view one trajectory's patch instead")

    def view_patch(self, label: str, path: str = "") -> str:
        t, parsed = self.trajectory(label), self._parsed[label]
        if not (t.patch or "").strip():
            return f"{label}: empty patch"
        files = parsed.files
        if path:
            files = tuple(f for f in files if f.path == path)
            if not files:
                names = ", ".join(f.path for f in parsed.files) or "(none parsed)"
                raise ToolError(f"{label} does not change {path!r}; it changes: {names}")
        if parsed.error and not path:
            body = f"[patch problem: {parsed.error}; raw text follows]\n{t.patch}"
        else:
            body = "\n".join(_render_file(label, f) for f in files)
        hint = "pass a path to see one file" if not path else "the rest of this file is not shown"
        return cap(body, self.caps.output_chars, hint)

    def view_transcript(self, label: str, start: int = 0, end: int | None = None) -> str:
        messages = self.trajectory(label).messages or []
        if not messages:
            return f"{label}: no transcript"
        total = len(messages)
        start = max(0, min(number_argument("start", start), total))
        end = total if end is None else max(start, min(number_argument("end", end), total))
        notes = []
        if end - start > self.caps.turns_per_view:
            end = start + self.caps.turns_per_view
            notes.append(f"[showing at most {self.caps.turns_per_view} turns a call]")
        if start == end:
            return f"{label}: no turns in that range; the transcript has turns 0..{total - 1}"
        lines = [f"{label} transcript, turns {start}..{end - 1} of 0..{total - 1}"]
        for i in range(start, end):
            text = cap(_message_text(messages[i]), self.caps.turn_chars,
                       "search for a phrase of this turn to see more of it")
            lines.append(f"#{i} {messages[i].get('role', '?')}: {text}")
        if end < total:
            notes.append(f"[turns {end}..{total - 1} not shown]")
        body = "\n".join(lines + notes)
        return cap(body, self.caps.output_chars, "ask for fewer turns")

    def search(self, pattern: str, labels: Sequence[str] | None = None) -> str:
        if not text_argument("pattern", pattern).strip():
            raise ToolError("empty search pattern")
        labels = list(labels or self.labels)
        for label in labels:
            self.trajectory(label)
        needle = pattern.lower()
        hits, counts = [], dict.fromkeys(labels, 0)
        for label in dict.fromkeys(labels):
            for where, text in self._searchable(label):
                if needle in text.lower():
                    counts[label] += 1
                    hits.append(f"{where}: {_snippet(text, needle, self.caps.hit_chars)}")
        summary = ", ".join(f"{lab}={n}" for lab, n in counts.items())
        shown = hits[: self.caps.search_hits]
        lines = [f"search {pattern!r}: {len(hits)} hits ({summary})"] + shown
        if len(hits) > len(shown):
            lines.append(f"[truncated: {len(hits) - len(shown)} more hits not shown; "
                         "narrow the pattern or the labels]")
        return cap("\n".join(lines), self.caps.output_chars, "narrow the pattern or the labels")

    def compare(self, a: str, b: str) -> str:
        self.trajectory(a)
        self.trajectory(b)
        if a == b:
            raise ToolError("compare needs two different labels")
        files = interdiff(self._parsed[a], self._parsed[b])
        if not files:
            return f"{a} and {b}: neither patch changes a file"
        lines = [f"How {b}'s change differs from {a}'s, file by file:"]
        for f in files:
            status = {"only_a": f"only in {a}", "only_b": f"only in {b}"}.get(f.status, f.status)
            lines.append(f"== {f.path}: {status}")
            lines.extend(_relabel(line, a, b) for line in f.lines)
            if f.truncated:
                lines.append("[truncated: lines left out of this file; view_patch shows it whole]")
        return cap("\n".join(lines), self.caps.output_chars, "view_patch with a path shows one file")

    def view_tests(self, label: str) -> str:
        t = self.trajectory(label)
        tests = t.tests or {}
        lines = [f"{label}: {'PASS' if t.passed else 'FAIL'} reward={t.reward:g}"]
        for key in ("passed", "failed"):
            names = list(tests.get(key) or ())
            shown = ", ".join(map(str, names[: self.caps.test_names]))
            more = f" ... [{len(names) - self.caps.test_names} more not shown]" \
                if len(names) > self.caps.test_names else ""
            lines.append(f"{key} ({len(names)}): {shown}{more}")
        log = str(tests.get("log") or "")
        if log:
            tail = log[-self.caps.log_chars:]
            cut = f"[truncated: showing the last {len(tail)} of {len(log)} characters]\n" \
                if len(tail) < len(log) else ""
            lines.append(f"log:\n{cut}{tail}")
        if not tests:
            lines.append("no test evidence recorded")
        return cap("\n".join(lines), self.caps.output_chars, "the log tail is shown")

    def evidence_consensus(self) -> str:
        return cap(evidence.consensus_text(self.evidence), self.caps.output_chars,
                   "compare two labels to see where they differ")

    def evidence_integrity(self) -> str:
        return cap(evidence.integrity_text(self.evidence), self.caps.output_chars,
                   "view_patch shows the marked lines")

    def evidence_minimality(self) -> str:
        return cap(evidence.minimality_text(self.evidence), self.caps.output_chars,
                   "list_trajectories shows each one's size")

    def evidence_execution(self) -> str:
        return cap(execution_text(self.group, self.label_of), self.caps.output_chars,
                   "view_patch shows a candidate's change")

    def _code_tool(self, tool: str, **args) -> str:
        if tool == "run_all":
            passing = [(label, self._by_label[label]) for label in self.passing_labels]
            self._code_available(tool)
            return self.code.run_all(passing, **args)
        label = args.pop("label", None)
        trajectory = self.trajectory(label)
        self._code_available(tool)
        return getattr(self.code, tool)(label, trajectory, **args)

    def _code_available(self, tool: str) -> None:
        unavailable = self.no_code()
        if unavailable:
            raise ToolError(f"{tool} is unavailable for this group: {unavailable}")

    def no_code(self) -> str:
        """Why the code tools do not work here; "" when they do."""
        if not self.code_offered:
            return self.group.no_execution or "no execution evidence was gathered"
        if self.code is None:
            return self.group.no_code or "this workspace was built without the group's code"
        return ""

    def code_note(self) -> str:
        """What the first turn says of the code tools: the same for every workspace of the group
        (the SFT export's too), so it follows the evidence, not whether the code came."""
        if not self.code_offered:
            return f"Code: view_file, run_tests, run and run_all are unavailable for this group: {self.no_code()}."
        return (f"Code: view_file, run_tests, run and run_all work on each candidate's code; they may run code "
                f"{self.caps.code_runs} time(s), {self.caps.code_seconds:g} s in all.")

    # --- submission --------------------------------------------------------------------

    def submission(self, action: Mapping) -> tuple[tuple[tuple[str, ...], ...], dict, dict]:
        """A submit_ranking action in labels -> (tiers, rationales, flags) in trajectory ids.

        Raises InvalidRanking, in terms of labels, for the agent's repair turn.
        """
        ranking = action.get("ranking")
        rationales = action.get("rationales")
        flags = action.get("flags") or {}
        if not isinstance(ranking, list) or not all(isinstance(t, list) for t in ranking):
            raise InvalidRanking("ranking must be a list of tiers, each a list of labels")
        if not isinstance(rationales, dict) or not isinstance(flags, dict):
            raise InvalidRanking("rationales and flags must be objects keyed by label")
        tiers = validate_ranking(ranking, self.passing_labels, flags)
        blank = [lab for lab in self.passing_labels if not str(rationales.get(lab, "")).strip()]
        if blank:
            raise InvalidRanking(f"no rationale for: {', '.join(blank)}")
        extra = sorted(set(rationales) - set(self.passing_labels))
        if extra:
            raise InvalidRanking(f"rationales for labels that are not ranked: {', '.join(extra)}")
        to_id = self.mapping
        return (
            tuple(tuple(to_id[lab] for lab in tier) for tier in tiers),
            {to_id[lab]: str(rationales[lab]) for lab in self.passing_labels},
            {to_id[lab]: tuple(names) for lab, names in flags.items() if names},
        )

    def initial_messages(self, *, max_turns: int = DEFAULT_MAX_TURNS, prior: str = "") -> list[dict]:
        """The system prompt and the first user turn; `prior` (the hybrid grader's) is
        shown after the trajectories."""
        statement = cap(self.group.statement or "(no statement)", self.caps.statement_chars,
                        "the rest of the statement is not shown")
        repo = f"Repository: {self.group.repo}\n" if self.group.repo else ""
        prior = f"{prior}\n\n" if prior else ""
        user = (f"{repo}Task:\n{statement}\n\n{self.list_trajectories()}\n\n{self.code_note()}\n\n{prior}"
                f"You have {max_turns} turns, the submission included. Reply with one action.")
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    # --- internals -----------------------------------------------------------------------

    def _searchable(self, label: str):
        for f in self._parsed[label].files:
            for h in f.hunks:
                line_no = h.target_start
                for kind, text in h.lines:
                    if kind != "-":
                        where = f"{label} {f.path}:{line_no}"
                        line_no += 1
                    else:
                        where = f"{label} {f.path} (removed)"
                    yield where, kind + text
        for i, message in enumerate(self.trajectory(label).messages or []):
            yield f"{label}#{i} {message.get('role', '?')}", _message_text(message)


def render_prompt(group: GroupCase, seed: int, *, caps: Caps | None = None,
                  max_turns: int = DEFAULT_MAX_TURNS) -> list[dict]:
    """The grader's first two messages (system, user) for `group` labelled with `seed`."""
    return Workspace(group, seed, caps).initial_messages(max_turns=max_turns)


def render_submission(workspace: Workspace, tiers: Sequence[Sequence[str]],
                      rationales: Mapping[str, str],
                      flags: Mapping[str, Sequence[str]] | None = None) -> str:
    """A ranking in trajectory ids as the submit_ranking action the agent would write: labels
    in label order inside a tier and as keys, the order the answer schema fixes for
    constrained decoding (grading/actions.py)."""
    order = {label: i for i, label in enumerate(workspace.labels)}
    ranking = [sorted((workspace.label_of(t) for t in tier), key=order.__getitem__) for tier in tiers]
    ranked = sorted((label for tier in ranking for label in tier), key=order.__getitem__)
    flags = flags or {}
    action = {
        "tool": SUBMIT,
        "ranking": ranking,
        "rationales": {label: rationales.get(workspace.mapping[label], "") for label in ranked},
        "flags": {label: list(flags.get(workspace.mapping[label], ())) for label in ranked},
    }
    return json.dumps(action, ensure_ascii=False)


def execution_text(group: GroupCase, label_of) -> str:
    """The execution matrix by label: per candidate and suite, how many of its tests pass and
    which fail; then the verdicts and what was skipped. Suites named after a candidate (a
    peer's tests) are named by its label, never its id."""
    matrix = group.execution
    if matrix is None:
        return f"No execution evidence: {group.no_execution or 'none gathered'}."

    def suite_name(suite: str) -> str:
        kind, _, author = suite.partition(":")
        return f"{kind}:{label_of(author)}" if author else kind

    def name(tid: str) -> str:
        return "the reference fix" if tid == REFERENCE else "the base code" if tid == BASE else label_of(tid)

    lines = ["Execution evidence: each candidate's code run in a sandbox. Suites: reward (the reward's "
             "tests, with the task's test patch), reward_files (every test of the test patch's files, "
             "the human fix's own tests beside the reward's), existing (the codebase's tests of the modules "
             "the passing candidates touch, on each one's non-test changes), peer:X (the tests X wrote, on "
             "each one's non-test changes). The task's reference fix runs reward and reward_files as a "
             "control: a test it fails here counts against no candidate."]
    ids = sorted(matrix.passed, key=label_of) + ([REFERENCE] if matrix.reference else [])
    for tid in ids:
        cells = []
        for suite in matrix.suites():
            run = matrix.run_of(tid, suite)
            if run is None:
                continue
            tests = matrix.tests(suite)
            statuses = {test: matrix.status(tid, suite, test) for test in tests}
            failing = [test for test, status in statuses.items() if status != "pass"]
            passed = len(tests) - len(failing)
            text = f"{suite_name(suite)} {passed}/{len(tests)} pass" if tests else \
                f"{suite_name(suite)} {run.outcome.status}"
            if run.outcome.reason:
                text += f" ({run.outcome.reason})"
            if failing:
                text += "; not passing: " + ", ".join(f"{t} [{statuses[t]}]" for t in failing[:5])
                text += f", +{len(failing) - 5} more" if len(failing) > 5 else ""
            cells.append(text)
        verdict = "the control, not ranked" if tid == REFERENCE else "PASS" if matrix.passed[tid] else "FAIL"
        lines.append(f"{name(tid)} ({verdict}): " + ("; ".join(cells) if cells else "no runs"))
    control = reference_control(matrix)
    lines += [f"Control: {note}" for note in control.notes]
    broken = breaks_tests(matrix)
    unreproduced = flaky(matrix)
    lines.append("Fails tests most other passing candidates pass: " + (
        "; ".join(f"{label_of(t)} ({', '.join(f'{suite_name(s)}: {n}' for s, n in cells[:5])})"
                  for t, cells in sorted(broken.items(), key=lambda kv: label_of(kv[0]))) or "none"))
    reward_files = fails_reward_files(matrix)
    bar = "most other passing candidates pass" if control.bar is None else "the reference fix passes"
    lines.append(f"Fails tests of the test patch's files, beyond the reward's, that {bar}: " + (
        "; ".join(f"{label_of(t)} ({', '.join(tests[:5])}{f', +{len(tests) - 5} more' if len(tests) > 5 else ''})"
                  for t, tests in sorted(reward_files.items(), key=lambda kv: label_of(kv[0]))) or "none"))
    lines.append("Reward verdicts that do not reproduce: " + (
        "; ".join(f"{label_of(t)}: {why}" for t, why in sorted(unreproduced.items(),
                                                                key=lambda kv: label_of(kv[0]))) or "none"))
    lines += _probes_text(matrix, label_of, name)
    for skipped in matrix.skipped:
        who = ", ".join(name(c) for c in skipped.candidates)
        lines.append(f"Skipped {suite_name(skipped.suite) if skipped.suite != '*' else 'every suite'} "
                     f"for {who}: {skipped.reason}")
    return "\n".join(lines)


def _probes_text(matrix, label_of, name) -> list[str]:
    """The trace against the reference fix (each call a candidate ends otherwise) and the
    statement's examples on the base code, the reference fix and each passing candidate."""
    note = trace_control(matrix)
    if note:
        lines = [f"Trace against the reference fix: {note}."]
    else:
        diverging = diverges_from_reference(matrix)
        lines = ["Calls of the functions the reference fix changes, traced through the test patch's tests, that "
                 "end otherwise than the reference fix's same call: " + ("none" if not diverging else "; ".join(
                     f"{label_of(t)}: " + ", ".join(str(d) for d in calls[:5])
                     + (f", +{len(calls) - 5} more" if len(calls) > 5 else "")
                     for t, calls in sorted(diverging.items(), key=lambda kv: label_of(kv[0]))))]
    if not matrix.examples:
        return lines
    differing = example_differences(matrix)
    lines.append("The statement's examples (shown, never ranked by alone), each run on the base code, the reference "
                 "fix and each passing candidate: its output, an exception as its last line.")
    ids = [tid for tid in (BASE, REFERENCE, *sorted((t for t, p in matrix.passed.items() if p), key=label_of))
           if tid in matrix.probes and matrix.probes[tid].examples is not None]
    for index, example in enumerate(matrix.examples):
        lines.append(f"Example {index + 1}:\n{example.source.rstrip()}")
        for tid in ids:
            outcomes = matrix.probes[tid].examples.outcomes
            outcome = outcomes[index] if index < len(outcomes) else None
            ended = "" if outcome is None or outcome.status == "exit" else f" [{outcome.status}]"
            shown = "did not run" if outcome is None else (outcome.output.rstrip() or "(no output)") + ended
            mark = " (otherwise than the reference fix, which changes it)" if index in differing.get(tid, ()) else ""
            lines.append(f"  {name(tid)}{mark}: {shown}")
    return lines


def _render_file(label: str, f: FileDiff) -> str:
    head = f"=== {label}: {f.path} ({f.status}"
    head += f" from {f.old_path}" if f.old_path and f.old_path != f.path else ""
    lines = [head + f", +{f.added} -{f.removed}) ==="]
    for h in f.hunks:
        lines.append(h.header)
        marked = dict(h.line_markers)
        line_no = h.target_start
        for i, (kind, text) in enumerate(h.lines):
            number = "" if kind == "-" else str(line_no)
            note = f"   <- {MARKER_LABELS[marked[i]]}" if i in marked else ""
            lines.append(f"{number:>5} {kind}{text}{note}")
            line_no += kind != "-"
    return "\n".join(lines)


def _message_text(message: Mapping) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    parts = [str(content or "")]
    for call in message.get("tool_calls") or ():
        function = call.get("function", call) if isinstance(call, Mapping) else {}
        parts.append(f"[call {function.get('name', '?')}: {function.get('arguments', '')}]")
    return "\n".join(p for p in parts if p)


def _snippet(text: str, needle: str, width: int) -> str:
    text = " ".join(text.split())
    at = text.lower().find(needle)
    start = max(0, at - width // 3)
    piece = text[start:start + width]
    return ("..." if start else "") + piece + ("..." if start + width < len(text) else "")


def _relabel(line: str, a: str, b: str) -> str:
    """interdiff names the sides A/ and B/; use the agent's labels instead."""
    if line.startswith("--- A/"):
        return f"--- {a}/{line[6:]}"
    if line.startswith("+++ B/"):
        return f"+++ {b}/{line[6:]}"
    if line.startswith("A: ") and "; B: " in line:
        return f"{a}: {line[3:]}".replace("; B: ", f"; {b}: ", 1)
    return line
