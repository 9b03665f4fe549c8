"""What a patch would write, read without applying it, and the rules that refuse it.

A patch in `git diff` form (or a plain unified diff) names its files in `diff --git`,
`---`/`+++`, `rename`/`copy` lines; `git apply` strips their first component (`a/`,
`b/`). Every name must then be a path inside the tree: relative, no `..` segment, not
inside `.git` (whose hooks and config the worker's own git would run). A symlink the
patch creates or changes (mode 120000) must point inside the tree, its target written as
text. Paths that lead through a symlink already in the codebase, and the symlinks git
made however the patch spelled their mode, are checked on the copy
(`workdir.prepare_workdir`), since only the files know.
"""

from __future__ import annotations

import posixpath
import re

from grading.sandbox.errors import PatchRefused

SYMLINK_MODE = "120000"
NO_FILE = "/dev/null"
_NAME_LINES = re.compile(r"^(?:--- |\+\+\+ |rename from |rename to |copy from |copy to )(.*)$")
_SYMLINK_LINES = re.compile(rf"^(?:new file mode |new mode |index \S+ ){SYMLINK_MODE}$")
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            '"': '"', "\\": "\\"}


def patch_paths(patch: str) -> list[str]:
    """The paths, relative to the tree, that `patch` reads or writes, in order, once each.

    Raises PatchRefused naming the first path that is absolute, has a `..` segment or lies
    in `.git`, and the first symlink whose target leaves the tree."""
    paths: list[str] = []
    for header, hunks in _file_sections(patch):
        names = [name for line in header for name in _names_in(line)]
        for name in names:
            path = _checked(name)
            if path not in paths:
                paths.append(path)
        if names and any(_SYMLINK_LINES.match(line) for line in header):
            _check_symlink_target(_checked(names[-1]), _added_text(hunks))
    return paths


def _file_sections(patch: str) -> list[tuple[list[str], list[str]]]:
    """The patch's lines, per file it changes: (header lines, hunk lines). Hunk lines are
    counted from their `@@` line, so that a removed line `-- x` is not read as a header."""
    sections: list[tuple[list[str], list[str]]] = []
    old_left = new_left = 0
    for line in patch.splitlines():
        if old_left or new_left:
            sections[-1][1].append(line)
            if line.startswith((" ", "-")) or line == "":
                old_left -= 1
            if line.startswith((" ", "+")) or line == "":
                new_left -= 1
            continue
        hunk = _HUNK.match(line)
        if hunk and sections:
            old_left, new_left = (int(count or 1) for count in hunk.groups())
            continue
        if line.startswith("diff --git ") or (line.startswith("--- ") and not _in_git_header(sections)):
            sections.append(([], []))
        if sections:
            sections[-1][0].append(line)
    return sections


def _in_git_header(sections: list[tuple[list[str], list[str]]]) -> bool:
    """Whether the last section is a `diff --git` one still in its header."""
    return bool(sections) and sections[-1][0][0].startswith("diff --git ") and not sections[-1][1]


def _names_in(line: str) -> list[str]:
    if line.startswith("diff --git "):
        return _git_header_names(line.removeprefix("diff --git "))
    match = _NAME_LINES.match(line)
    if not match:
        return []
    name = match.group(1)
    name = _unquoted(name) if name.startswith('"') else name.split("\t")[0]
    if line.startswith(("--- ", "+++ ")):
        return [] if name == NO_FILE else [_strip_prefix(name)]
    return [name]  # rename and copy lines carry the name without its a/ or b/


def _git_header_names(rest: str) -> list[str]:
    if rest.startswith('"'):
        first, second = _split_quoted(rest)
        second = second.strip()
        second = _unquoted(second) if second.startswith('"') else second
        return [_strip_prefix(first), _strip_prefix(second)]
    # Unquoted names may hold spaces: "a/x y b/x y" splits where both halves are one name.
    for at in (m.start() for m in re.finditer(" ", rest)):
        first, second = rest[:at], rest[at + 1:]
        if _strip_prefix(first) == _strip_prefix(second):
            return [_strip_prefix(first)]
    first, _, second = rest.partition(" ")
    return [_strip_prefix(first), _strip_prefix(second)]


def _strip_prefix(name: str) -> str:
    """`git apply`'s -p1: drop the first component; a name with none is kept whole."""
    if name.startswith("/"):
        return name  # refused as absolute: git would strip it to a relative path
    head, slash, rest = name.partition("/")
    return rest if slash else head


def _checked(name: str) -> str:
    if not name:
        raise PatchRefused(name, "empty path")
    if name.startswith("/"):
        raise PatchRefused(name, "absolute path: a patch writes inside the tree only")
    segments = name.split("/")
    if ".." in segments:
        raise PatchRefused(name, "'..' in the path leaves the tree")
    if segments[0] == ".git":
        raise PatchRefused(name, "writes inside .git")
    return posixpath.normpath(name)


def _check_symlink_target(path: str, target: str | None) -> None:
    if target is None:
        raise PatchRefused(path, "a symlink whose target is not in the patch as text "
                                 "(a GIT binary patch): it cannot be checked")
    if target.startswith("/"):
        raise PatchRefused(path, f"symlink to {target!r}: an absolute target leaves the tree")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if resolved == ".." or resolved.startswith("../"):
        raise PatchRefused(path, f"symlink to {target!r} leaves the tree")


def _added_text(hunks: list[str]) -> str | None:
    """A symlink's new target: the `+` line of its hunk (None when it has none)."""
    return next((line[1:] for line in hunks if line.startswith("+")), None)


def _split_quoted(text: str) -> tuple[str, str]:
    """The C-quoted name at the start of `text` (git quotes names with odd characters,
    bytes as octal escapes), and the rest of the text."""
    name = bytearray()
    index = 1
    while index < len(text):
        char = text[index]
        if char == '"':
            return name.decode("utf-8", errors="replace"), text[index + 1:]
        if char == "\\":
            code = text[index + 1:index + 2]
            if code.isdigit():
                name.append(int(text[index + 1:index + 4], 8))
                index += 4
                continue
            name += _ESCAPES.get(code, code).encode()
            index += 2
            continue
        name += char.encode()
        index += 1
    raise PatchRefused(text, "unterminated quoted name")


def _unquoted(name: str) -> str:
    return _split_quoted(name)[0]
