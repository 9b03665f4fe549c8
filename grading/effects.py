"""What a patch's fix does to behaviour, read from the diff alone.

Two markers for the heuristic grader, both over the *fix*: the files that are neither
tests nor stray leftovers (``FileDiff.is_test``, the ``stray_file`` marker), as the
heuristic counts a fix's lines.

- ``no_effect``: the fix changes nothing a program can observe: it is empty, or every
  change is whitespace, a comment or (Python) a docstring. A test suite that passes with
  such a patch passes without a fix, so whatever the candidate did, it fixed nothing.
- ``removed_behaviour``: the fix deletes a ``return``, ``raise`` or ``yield`` statement or
  a call ``name(...)`` that the same hunk does not write again (a statement of the same
  kind, a call to the same name). Sometimes that is the fix; it is a marker, not a verdict.

Both read hunks, not files: a hunk starts and ends anywhere, inside a string or a
bracket. Where a hunk cannot be read as code (it does not tokenise) it counts as a change
with an effect: the markers stay silent rather than guess.
"""

from __future__ import annotations

import io
import keyword
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass

from grading.diffs import CODE_EXTENSIONS, MODIFIED, STRAY_FILE, FileDiff, Hunk, ParsedPatch, extension

_PYTHON = frozenset({"py", "pyi"})
# Line-comment prefixes by extension, for files other than Python. C's "#" is the
# preprocessor, not a comment, so C-like languages have "//" only.
_LINE_COMMENTS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("js", "jsx", "ts", "tsx", "mjs", "cjs", "go", "rs", "java", "kt", "scala",
                     "c", "h", "cc", "cpp", "hpp", "cs", "swift"), ("//",)),
    **dict.fromkeys(("pyx", "sh", "bash", "zsh", "rb", "pl", "pm", "r", "toml", "cfg", "conf",
                     "yaml", "yml"), ("#",)),
    **dict.fromkeys(("lua", "sql", "hs"), ("--",)),
    "php": ("//", "#"),
    "ini": (";", "#"),
    "tex": ("%",),
}
# Files whose indentation carries no meaning: only there does re-indenting count as whitespace.
_FREE_INDENT = frozenset(_LINE_COMMENTS) - {"pyx", "yaml", "yml"}


def fix_files(parsed: ParsedPatch) -> list[FileDiff]:
    """The files of `parsed` that make the fix: neither tests nor stray leftovers."""
    return [f for f in parsed.files if not f.is_test and STRAY_FILE not in f.markers]


# --- no effect ----------------------------------------------------------------------


def no_effect(parsed: ParsedPatch) -> str | None:
    """Why `parsed` changes no behaviour, as a rationale says it, or None when it may.

    A patch that did not parse may hide changes in its broken sections: None. A new,
    deleted, renamed or binary file always has an effect (an empty ``__init__.py`` makes
    a package), and so has a file changed without hunks (its mode)."""
    if parsed.error is not None:
        return None
    if not parsed.files:
        return "changes no behaviour: the patch is empty"
    fix = fix_files(parsed)
    if not fix:
        others = [f.path for f in parsed.files]
        return f"changes no behaviour: it changes only tests and leftover files ({_first(others)})"
    if any(f.status != MODIFIED or not f.hunks or not all(_hunk_has_no_effect(h, f.path) for h in f.hunks)
           for f in fix):
        return None
    what = ("comments, docstrings and whitespace" if any(extension(f.path) in _PYTHON for f in fix)
            else "comments and whitespace")
    return f"changes no behaviour: only {what} in {_first([f.path for f in fix])}"


def _first(paths: list[str], shown: int = 3) -> str:
    more = len(paths) - shown
    return ", ".join(paths[:shown]) + (f", +{more} more" if more > 0 else "")


def _hunk_has_no_effect(hunk: Hunk, path: str) -> bool:
    before = [text for kind, text in hunk.lines if kind != "+"]
    after = [text for kind, text in hunk.lines if kind != "-"]
    ext = extension(path)
    if ext in _PYTHON:
        prefix = _indent_prefix(before + after)
        module_start = hunk.source_start <= 1
        old = _python_code(before, prefix, module_start)
        return old is not None and old == _python_code(after, prefix, module_start)
    return _plain_code(before, ext) == _plain_code(after, ext)


def _plain_code(lines: list[str], ext: str) -> list[str]:
    """The lines that are code, by the file type's line comments, whitespace collapsed
    (indentation kept where it may be meaningful)."""
    comments = _LINE_COMMENTS.get(ext, ())
    keep_indent = ext not in _FREE_INDENT
    out = []
    for line in lines:
        body = " ".join(line.split())
        if not body or (comments and body.startswith(comments)):
            continue
        out.append(line[: len(line) - len(line.lstrip())] + body if keep_indent else body)
    return out


def _column(line: str) -> int:
    """The column of a line's first character, as `tokenize` counts it (tabs to 8)."""
    expanded = line.expandtabs(8)
    return len(expanded) - len(expanded.lstrip(" "))


def _indent_prefix(lines: list[str]) -> str:
    """Lines opening one block per indentation column of `lines`, deepest last: a hunk
    starts at any depth, and `tokenize` refuses a dedent to a column it has not seen.
    Before and after share one prefix, so its tokens cancel out."""
    columns = sorted({_column(line) for line in lines if line.strip()} - {0})
    return "".join(" " * column + "if 1:\n" for column in columns)


def _python_code(lines: list[str], prefix: str, module_start: bool) -> list | None:
    """The tokens of `lines` that make behaviour: logical lines of (type, text) tokens and
    the INDENT/DEDENT between them, without comments, blank lines, line breaks inside
    brackets and docstrings (a string alone on the first logical line after a ``def`` or
    ``class`` header, or at the start of the module). None when they do not tokenise, or
    close a bracket they did not open."""
    skipped = prefix.count("\n")
    text = prefix + "".join(line + "\n" for line in lines)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):  # a hunk that starts or ends inside a string or bracket
        return None
    code: list = []
    logical: list[tokenize.TokenInfo] = []
    docstring_may_follow = module_start
    depth = 0
    for token in tokens:
        if token.start[0] <= skipped or token.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER):
            continue
        if token.type == tokenize.OP:
            depth += (token.string in "([{") - (token.string in ")]}")
        if depth < 0:  # the hunk starts inside a bracket: its line breaks are not statements
            return None
        if token.type in (tokenize.INDENT, tokenize.DEDENT):
            code.append(token.type)
        elif token.type == tokenize.NEWLINE:
            if not (docstring_may_follow and all(t.type == tokenize.STRING for t in logical)):
                code.append(tuple((t.type, t.string) for t in logical))
            docstring_may_follow = logical[0].string in ("def", "async", "class") and logical[-1].string == ":"
            logical = []
        else:
            logical.append(token)
    return code


# --- removed behaviour ----------------------------------------------------------------


@dataclass(frozen=True)
class RemovedLine:
    """A deleted line holding behaviour its hunk does not write again; `line` is its
    number in the old file."""

    path: str
    line: int
    text: str

    def __str__(self) -> str:
        text = self.text.strip()
        return f"{self.path}:{self.line} `{text if len(text) <= 60 else text[:57] + '...'}`"


_STATEMENT_RE = re.compile(r"\s*(return|raise|yield)\b")
_CALL_RE = re.compile(r"(?:\b(def|class|function|func|fn)\s+)?(?<!\w)([A-Za-z_][\w.]*)\s*\(")
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
# Words a "(" follows that are not calls.
_NOT_CALLS = frozenset(keyword.kwlist) | {"switch", "catch", "sizeof", "typeof", "function"}


def removed_behaviour(parsed: ParsedPatch) -> list[RemovedLine]:
    """The fix's deleted lines of code that hold a return, raise, yield or call their hunk
    does not write again, in patch order."""
    out = []
    for f in fix_files(parsed):
        ext = extension(f.path)
        if ext not in CODE_EXTENSIONS:
            continue
        for hunk in f.hunks:
            out += _removed_in_hunk(hunk, f.path, ext)
    return out


def _removed_in_hunk(hunk: Hunk, path: str, ext: str) -> list[RemovedLine]:
    added = set().union(*(_behaviour(code) for _, code in _changed_code(hunk.lines, "+", ext)))
    numbers = hunk.line_numbers()
    return [RemovedLine(path, numbers[i][0], hunk.lines[i][1])
            for i, code in _changed_code(hunk.lines, "-", ext) if _behaviour(code) - added]


def _changed_code(lines: tuple[tuple[str, str], ...], side: str, ext: str) -> Iterator[tuple[int, str]]:
    """(index, code) of the lines of kind `side` ("-" or "+") that are code: string
    literals blanked, comments cut, lines inside Python triple-quoted strings (docstrings)
    left out, as the context and that side's lines open and close them. A hunk that starts
    inside a triple-quoted string gets this backwards, as ``diff_markers.analyse_hunk`` does."""
    comments = ("#",) if ext in _PYTHON else _LINE_COMMENTS.get(ext, ())
    in_string = False
    for i, (kind, text) in enumerate(lines):
        if kind not in (" ", side):
            continue
        quoted = in_string
        if ext in _PYTHON and (text.count('"""') + text.count("'''")) % 2:
            in_string = not in_string
            quoted = True
        if quoted or kind != side:
            continue
        code = _STRING_RE.sub('""', text)
        for prefix in comments:
            code = code.split(prefix, 1)[0]
        if code.strip():
            yield i, code


def _behaviour(code: str) -> set[str]:
    """What a line of code does that a deletion loses: "return", "raise", "yield", and
    "call NAME" per call (the last part of a dotted name: ``self.save()`` is "call save")."""
    found = set()
    statement = _STATEMENT_RE.match(code)
    if statement:
        found.add(statement.group(1))
    for definition, name in _CALL_RE.findall(code):
        last = name.rsplit(".", 1)[-1]
        if not definition and last and last not in _NOT_CALLS:
            found.add(f"call {last}")
    return found
