"""Unified diffs in the form `git diff` writes them, so that every patch applies with `git apply`."""

from __future__ import annotations

import difflib
import hashlib
import re


def blob_id(text: str) -> str:
    data = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _range(start: int, stop: int) -> str:
    length = stop - start
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


_FUNCNAME = re.compile(r"^[A-Za-z_$]")


def _funcname(lines: list[str], before: int) -> str:
    """git's default hunk-header context: the last line before the hunk that starts a word."""
    for line in reversed(lines[:before]):
        if _FUNCNAME.match(line):
            return " " + line.rstrip()[:80].rstrip()
    return ""


def file_diff(path: str, old: str | None, new: str | None) -> str:
    a = old.splitlines(keepends=True) if old is not None else []
    b = new.splitlines(keepends=True) if new is not None else []
    out = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        out += ["new file mode 100644\n", f"index 0000000..{blob_id(new)[:7]}\n"]
        out += ["--- /dev/null\n", f"+++ b/{path}\n"]
    elif new is None:
        out += ["deleted file mode 100644\n", f"index {blob_id(old)[:7]}..0000000\n"]
        out += [f"--- a/{path}\n", "+++ /dev/null\n"]
    else:
        out += [f"index {blob_id(old)[:7]}..{blob_id(new)[:7]} 100644\n"]
        out += [f"--- a/{path}\n", f"+++ b/{path}\n"]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(3):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        context = _funcname(a, i1) if old is not None else ""
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@{context}\n")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                out += [" " + line for line in a[x1:x2]]
                continue
            out += ["-" + line for line in a[x1:x2]]
            out += ["+" + line for line in b[y1:y2]]
    return "".join(out)


def make_patch(old: dict[str, str], new: dict[str, str]) -> str:
    parts = []
    for path in sorted(set(old) | set(new)):
        if old.get(path) != new.get(path):
            parts.append(file_diff(path, old.get(path), new.get(path)))
    return "".join(parts)


def replace_once(text: str, old: str, new: str, where: str) -> str:
    """`str_replace_editor`'s rule: the old text must occur exactly once."""
    if text.count(old) != 1:
        raise SystemExit(f"{where}: the old text occurs {text.count(old)} times, not once")
    return text.replace(old, new)


def apply_edits(files: dict[str, str], edits: list[tuple[str, str, str]]) -> dict[str, str]:
    files = dict(files)
    for path, old, new in edits:
        files[path] = replace_once(files[path], old, new, f"edit of {path}")
    return files
