"""Diff analysis shared by the review UI and the graders.

Patches are untrusted agent output in ``git diff`` format: empty, malformed,
binary or huge. ``parse_patch`` never raises; a patch it cannot read comes
back with ``error`` set and whatever file sections did parse, so the UI can
fall back to the raw text. Parsing splits the text at ``diff --git`` lines
and hands each file section to ``unidiff``, so one broken section does not
hide the others.

On top of the parse sit integrity markers (cheap, explainable signals such as
debug prints or leftover scripts), per-patch statistics for the heuristic
grader, grouping of equivalent patches and file alignment across a group
(``grading.interdiff`` compares two patches).
"""

from __future__ import annotations

import codecs
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from functools import cached_property

from unidiff import PatchSet
from unidiff.constants import DEV_NULL

from grading.diff_markers import (  # noqa: F401  (markers are part of this module's API)
    BINARY,
    CODE_EXTENSIONS,
    COMMENTED_CODE,
    DEBUG_OUTPUT,
    DELETES_TESTS,
    EDITS_TESTS,
    LARGE_FILE,
    LARGE_FILE_LINES,
    MARKER_LABELS,
    STRAY_FILE,
    TAMPERS_WITH_TESTS,
    WHITESPACE_ONLY,
    Budget,
    analyse_hunk,
    configures_runner,
    extension,
    is_runner_source,
    is_stray_path,
    is_test_path,
    normalise_whitespace,
)

MODIFIED, ADDED, DELETED, RENAMED = "modified", "added", "deleted", "renamed"
IDENTICAL, WHITESPACE = "identical", "whitespace"

@dataclass(frozen=True)
class Hunk:
    """One ``@@`` block. ``header`` is the @@ line, lengths always written out.
    ``lines`` holds (kind, text), kind in " +-", with line endings removed (so
    a CRLF-only change reads as whitespace_only).
    ``line_markers`` holds (index into lines, marker) for line-level markers."""

    header: str
    source_start: int
    target_start: int
    lines: tuple[tuple[str, str], ...]
    added: int
    removed: int
    markers: frozenset[str] = frozenset()
    line_markers: tuple[tuple[int, str], ...] = ()

    def line_numbers(self) -> list[tuple[int | None, int | None]]:
        """(old, new) line number of each line: both for context, old only for a
        removed line, new only for an added one."""
        old, new, out = self.source_start, self.target_start, []
        for kind, _ in self.lines:
            out.append((old if kind != "+" else None, new if kind != "-" else None))
            old += kind != "+"
            new += kind != "-"
        return out


@dataclass(frozen=True)
class FileDiff:
    """One file of a patch. ``old_path`` is None exactly when the file is new;
    ``status`` is "binary" for any binary change, new or not. ``configures_runner``:
    the change configures the test runner (pytest.ini, a pytest section of tox.ini...),
    test machinery that the execution evidence leaves out."""

    path: str
    old_path: str | None
    status: str
    hunks: tuple[Hunk, ...]
    added: int
    removed: int
    markers: frozenset[str] = frozenset()
    is_test: bool = False
    configures_runner: bool = False


@dataclass(frozen=True)
class ParsedPatch:
    files: tuple[FileDiff, ...] = ()
    error: str | None = None

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed for f in self.files)

    @cached_property
    def markers(self) -> frozenset[str]:
        return frozenset().union(*(f.markers for f in self.files))

    def file(self, path: str) -> FileDiff | None:
        return next((f for f in self.files if f.path == path), None)


# --- parsing ------------------------------------------------------------------

_KINDS = ("+", "-", " ")  # unidiff also yields "\\" (no newline) and "" (trailing blank)


def _clean_path(raw: str | None, prefix: str) -> str | None:
    if raw is None or raw == DEV_NULL:
        return None
    path = raw.strip()
    if len(path) >= 2 and path[0] == path[-1] == '"':  # git's C-style quoting
        try:
            path = codecs.escape_decode(path[1:-1].encode())[0].decode("utf-8", "replace")
        except ValueError:
            path = path[1:-1]
    return path[2:] if path.startswith(prefix) else path


def _file_diff(pf, budget: Budget) -> FileDiff:
    src = _clean_path(pf.source_file, "a/")
    tgt = _clean_path(pf.target_file, "b/")
    path = tgt or src or ""
    if pf.is_binary_file:
        status = BINARY
    elif src is None:
        status = ADDED
    elif tgt is None:
        status = DELETED
    else:
        status = RENAMED if src != tgt else MODIFIED
    is_new = src is None
    is_test = is_test_path(path)
    stray = is_new and is_stray_path(path, binary=status == BINARY)
    ext = extension(path)
    check_code = ext in CODE_EXTENSIONS and not stray
    check_runner = ext == "py" and not is_runner_source(path)
    hunks = []
    for h in pf:
        lines = [(ln.line_type, ln.value.rstrip("\r\n")) for ln in h if ln.line_type in _KINDS]
        added = sum(1 for k, _ in lines if k == "+")
        removed = sum(1 for k, _ in lines if k == "-")
        header = f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
        section = h.section_header.strip()
        markers, flagged = analyse_hunk(lines, ext, is_test, check_code, is_new, budget, check_runner)
        hunks.append(Hunk(
            header=f"{header} {section}" if section else header,
            source_start=h.source_start, target_start=h.target_start, lines=tuple(lines),
            added=added, removed=removed,
            markers=markers, line_markers=flagged,
        ))
    added, removed = sum(h.added for h in hunks), sum(h.removed for h in hunks)
    runner_config = configures_runner(path, [list(h.lines) for h in hunks])
    markers = set().union(*(h.markers for h in hunks)) - {WHITESPACE_ONLY}
    if hunks and all(WHITESPACE_ONLY in h.markers for h in hunks):
        markers.add(WHITESPACE_ONLY)
    for flag, on in ((EDITS_TESTS, is_test), (DELETES_TESTS, is_test and status == DELETED),
                     (STRAY_FILE, stray), (BINARY, status == BINARY),
                     (LARGE_FILE, added + removed > LARGE_FILE_LINES),
                     (TAMPERS_WITH_TESTS, runner_config)):
        if on:
            markers.add(flag)
    return FileDiff(path=path, old_path=src, status=status, hunks=tuple(hunks),
                    added=added, removed=removed, markers=frozenset(markers), is_test=is_test,
                    configures_runner=runner_config)


def _sections(lines: list[str]) -> Iterator[tuple[int, list[str]]]:
    starts = [i for i, line in enumerate(lines) if line.startswith("diff --git ")]
    if not starts or starts[0] > 0:
        starts.insert(0, 0)
    for start, end in zip(starts, starts[1:] + [len(lines)], strict=True):
        yield start + 1, lines[start:end]


def parse_patch(text: str) -> ParsedPatch:
    """Parse a ``git diff``; never raises (bad input sets ``error``)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        return ParsedPatch(error=f"patch is {type(text).__name__}, not text")
    if not text.strip():
        return ParsedPatch()
    first_eol = text.find("\n")
    if first_eol > 0 and text[first_eol - 1] == "\r":  # a patch saved with CRLF throughout
        text = text.replace("\r\n", "\n")
    # split on "\n" only: str.splitlines would also break content at \f, \u2028, ...
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    files: list[FileDiff] = []
    errors: list[str] = []
    budget = Budget()
    for lineno, section in _sections(lines):
        try:
            files.extend(_file_diff(pf, budget) for pf in PatchSet(section))
        except Exception as exc:  # unidiff raises more than UnidiffParseError on junk
            message = f"file section at line {lineno}: {type(exc).__name__}: {exc}"
            errors.append(message.strip()[:300])
    error = None
    if errors:
        more = f" (and {len(errors) - 1} more broken file sections)" if len(errors) > 1 else ""
        error = errors[0] + more
    elif not files:
        error = "no file changes found in patch text"
    return ParsedPatch(files=tuple(files), error=error)


# --- statistics -----------------------------------------------------------------

@dataclass(frozen=True)
class PatchStats:
    """Features of one patch for the heuristic grader (``as_dict`` for rows)."""

    files_changed: int
    lines_added: int
    lines_removed: int
    lines_changed: int
    code_lines_changed: int  # outside test files and stray files: the fix itself
    hunks: int
    new_files: int
    deleted_files: int
    renamed_files: int
    binary_files: int
    test_files_touched: int
    test_files_added: int
    stray_files: int
    large_files: int
    whitespace_only_hunks: int
    test_removal_hunks: int
    debug_output_lines: int
    commented_code_lines: int
    parse_error: bool

    def as_dict(self) -> dict[str, int | bool]:
        return asdict(self)


def patch_stats(parsed: ParsedPatch) -> PatchStats:
    files = parsed.files
    hunks = [h for f in files for h in f.hunks]
    flags = Counter(m for h in hunks for _, m in h.line_markers)
    return PatchStats(
        files_changed=len(files),
        lines_added=parsed.added,
        lines_removed=parsed.removed,
        lines_changed=parsed.added + parsed.removed,
        code_lines_changed=sum(f.added + f.removed for f in files
                               if not f.is_test and STRAY_FILE not in f.markers),
        hunks=len(hunks),
        new_files=sum(f.old_path is None for f in files),
        deleted_files=sum(f.status == DELETED for f in files),
        renamed_files=sum(f.status == RENAMED for f in files),
        binary_files=sum(f.status == BINARY for f in files),
        test_files_touched=sum(f.is_test for f in files),
        test_files_added=sum(f.is_test and f.old_path is None for f in files),
        stray_files=sum(STRAY_FILE in f.markers for f in files),
        large_files=sum(LARGE_FILE in f.markers for f in files),
        whitespace_only_hunks=sum(WHITESPACE_ONLY in h.markers for h in hunks),
        test_removal_hunks=sum(DELETES_TESTS in h.markers for h in hunks),
        debug_output_lines=flags[DEBUG_OUTPUT],
        commented_code_lines=flags[COMMENTED_CODE],
        parse_error=parsed.error is not None,
    )


# --- equivalence --------------------------------------------------------------------

@dataclass(frozen=True)
class EquivalenceClass:
    """Trajectories with the same patch. ``kind`` is "identical" when every
    member's patch text is byte-identical, else "whitespace"."""

    kind: str
    representative: str
    members: tuple[str, ...]


def change_key(parsed: ParsedPatch, text: str) -> object:
    """What two patches must share to count as the same change up to whitespace:
    per file, its changed lines whitespace-normalised, with context, index
    lines, hunk positions, blank lines and whitespace-only hunks left out.
    Unparseable or binary patches only match byte for byte. `parsed` is
    ``parse_patch(text)``, passed in by callers that have it already."""
    if parsed.error is not None or BINARY in parsed.markers:
        return ("raw", text)
    key = []
    for f in parsed.files:
        changes = tuple(
            (kind, normalise_whitespace(line))
            for h in f.hunks if WHITESPACE_ONLY not in h.markers
            for kind, line in h.lines if kind != " " and line.strip()
        )
        if changes or f.status != MODIFIED:
            key.append((f.path, f.old_path, f.status, changes))
    return ("changes", tuple(sorted(key, key=repr)))  # repr: an old_path may be None beside a str


def equivalence_classes(patches: Mapping[str, str]) -> list[EquivalenceClass]:
    """Group trajectory ids whose patches are the same change.

    Only groups of two or more are returned (a trajectory in no class is
    unique); each id is in at most one class. Classes and members follow input
    order; the representative is the first member.
    """
    keys: dict[str, object] = {}
    for text in patches.values():
        if text not in keys:
            keys[text] = change_key(parse_patch(text), text)
    return classes_by_key({tid: (text, keys[text]) for tid, text in patches.items()})


def classes_by_key(keyed: Mapping[str, tuple[Hashable, Hashable]]) -> list[EquivalenceClass]:
    """``equivalence_classes`` from each id's (patch identity, change key) where the
    keys were computed before (and stored): ids sharing a change key form a class,
    "identical" when they share the patch identity too (its text or a digest of it)."""
    groups: dict[Hashable, list[str]] = {}
    for tid, (_, key) in keyed.items():
        groups.setdefault(key, []).append(tid)
    classes = []
    for members in groups.values():
        if len(members) > 1:
            kind = IDENTICAL if len({keyed[m][0] for m in members}) == 1 else WHITESPACE
            classes.append(EquivalenceClass(kind, members[0], tuple(members)))
    return classes


# --- alignment across a group -----------------------------------------------------

@dataclass(frozen=True)
class FileRow:
    """One file path across a group; ``cells`` has every trajectory id, None
    where that trajectory did not touch the file."""

    path: str
    cells: dict[str, FileDiff | None]
    touched_by: tuple[str, ...]


def files_by_path(parsed: ParsedPatch) -> dict[str, FileDiff]:
    # git never repeats a path; for hand-made patches that do, the first wins
    out: dict[str, FileDiff] = {}
    for f in parsed.files:
        out.setdefault(f.path, f)
    return out


def align_files(patches: Mapping[str, ParsedPatch]) -> list[FileRow]:
    """Rows for every path, most-touched first, then alphabetical."""
    per_traj = {tid: files_by_path(parsed) for tid, parsed in patches.items()}
    paths = {path for files in per_traj.values() for path in files}
    rows = []
    for path in paths:
        cells = {tid: files.get(path) for tid, files in per_traj.items()}
        touched = tuple(tid for tid, cell in cells.items() if cell is not None)
        rows.append(FileRow(path=path, cells=cells, touched_by=touched))
    rows.sort(key=lambda row: (-len(row.touched_by), row.path))
    return rows


def unique_files(patches: Mapping[str, ParsedPatch], among: Iterable[str]) -> dict[str, set[str]]:
    """For each id in ``among``: the paths no other id in ``among`` touched."""
    ids = list(dict.fromkeys(among))
    touched = {tid: set(files_by_path(patches[tid])) for tid in ids}
    counts = Counter(path for paths in touched.values() for path in paths)
    return {tid: {p for p in paths if counts[p] == 1} for tid, paths in touched.items()}
