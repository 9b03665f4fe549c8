"""A candidate's private copy of the codebase, with its patch applied."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from grading.sandbox.errors import PatchRefused
from grading.sandbox.patches import patch_paths


def prepare_workdir(codebase: Path, patch: str, *, into: Path) -> Path:
    """Copy `codebase` (a git checkout or a plain folder) to `into`, a new folder in an
    existing one, apply `patch` there as `git apply` does, and return `into`.

    The patch is read before anything is copied (`patches.patch_paths`), and each path it
    names must not lead through a symlink of the codebase that points outside it. It is
    applied whole or not at all, and no file it names may then be a symlink whose target is
    absolute or leaves the tree. A patch of nothing but blank lines changes nothing.
    Raises PatchRefused, with `into` removed, when the patch breaks a rule or does not apply.
    """
    paths = patch_paths(patch)
    if into.exists():
        raise FileExistsError(f"{into}: a workdir must be a new folder")
    copied = subprocess.run(["cp", "-a", "--reflink=auto", "--no-target-directory",
                             str(codebase), str(into)], capture_output=True)
    if copied.returncode != 0:
        raise OSError(f"copying {codebase} to {into}: {copied.stderr.decode(errors='replace')}")
    try:
        for path in paths:
            _refuse_symlink_out(into, path)
        if patch.strip():
            _git_apply(into, patch)
            for path in paths:
                _refuse_symlink_made_out(into, path)
    except PatchRefused:
        remove_tree(into)
        raise
    return into


def remove_tree(folder: Path) -> None:
    """Remove a folder that a candidate's code ran in. Its code may have taken away the write
    or search permission of folders in it (one `chmod 000`), which stops a plain removal by
    any user but root: those are given back first."""
    try:
        shutil.rmtree(folder)
    except PermissionError:
        _give_back_permissions(folder)
        shutil.rmtree(folder)


def _give_back_permissions(folder: Path) -> None:
    stack = [folder]  # a loop, not recursion: a candidate's tree may nest deeper than Python's stack
    while stack:
        current = stack.pop()
        os.chmod(current, 0o700)
        with os.scandir(current) as entries:
            stack.extend(entry.path for entry in entries if entry.is_dir(follow_symlinks=False))


def _refuse_symlink_out(tree: Path, path: str) -> None:
    root = tree.resolve()
    if not (tree / path).resolve().is_relative_to(root):
        raise PatchRefused(path, "leads through a symlink out of the tree")


def _refuse_symlink_made_out(tree: Path, path: str) -> None:
    # git reads a mode as a number (0120000, "120000 ", 120755 are all a symlink) and a
    # binary hunk as data: the file it made, not the patch's text, says what is a link.
    made = tree / path
    if not made.is_symlink():
        return
    target = os.readlink(made)
    # realpath, not Path.resolve: a loop of links (harmless, and inside) raises in the latter.
    if target.startswith("/") or not Path(os.path.realpath(made)).is_relative_to(tree.resolve()):
        raise PatchRefused(path, f"symlink to {target!r} leaves the tree")


def _git_apply(tree: Path, patch: str) -> None:
    # In a plain folder that lies inside some other repository, git would take that one
    # as the repository and apply relative to its root; the ceiling stops the search.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.resolve().parent)}
    applied = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], cwd=tree, env=env,
                             input=patch.encode(), capture_output=True)
    if applied.returncode != 0:
        reason = applied.stderr.decode(errors="replace").strip()
        raise PatchRefused("", f"does not apply: {reason}")
