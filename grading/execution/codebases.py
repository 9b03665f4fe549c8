"""Where a task's code comes from: the deployment's codebase store, a folder of git
mirrors and snapshots (GAGAR_CODEBASES in the app).

A task names its code by `repo` and `base_commit`, found in a mirror of the store:

    <store>/<owner>/<name>.git   <store>/<owner>/<name>   <store>/<owner>__<name>.git   <store>/<owner>__<name>

(a bare mirror or a clone), or by `snapshot`, a path inside the store: an archive (.tar,
.tar.gz, .tgz, .zip) or a plain folder; never the store itself, a git repository or
anything in one, nor a folder that holds one (a mirror's config may carry a token).
`CodebaseStore.checkout` gives the tree at that point as a plain folder under a cache of
its own, made once per codebase and shared by every group and worker after; its id
(`repo@full commit`, or the snapshot's path and the digest of its content) is the
codebase part of every run's cache key. Anything missing is a `NoCodebase` with the
reason, which the group shows: "no execution evidence: <reason>".

The store is the deployment's own (its mirrors' git configuration is trusted); what a
snapshot holds is still unpacked with care: no member outside the tree, no link out of it.
The store may also give a repository's environment, for tasks that carry none (SWE-bench
task files do not): `<store>/environments.json`, {"owner/name": {...environment...}}.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ARCHIVES = (".tar", ".tar.gz", ".tgz", ".zip")
ENVIRONMENTS = "environments.json"
_CHUNK = 1024 * 1024
_NOT_CODE = (".git", "__pycache__")  # not part of a codebase: history, and what running it leaves


class NoCodebase(Exception):
    """The task's code cannot be had here; the message says why."""


@dataclass(frozen=True)
class Codebase:
    """A task's code at its base: `id` names it in cache keys, `path` is a plain folder of
    its files (never written to: runs copy it), `files` its file paths, sorted."""

    id: str
    path: Path
    files: tuple[str, ...]


class CodebaseStore:
    """The store at `root`; trees are unpacked under `cache` (a folder the sandbox's user
    may enter: runs copy from it)."""

    def __init__(self, root: Path, cache: Path) -> None:
        self.root = Path(root)
        self.cache = Path(cache)

    def checkout(self, *, repo: str = "", base_commit: str = "", snapshot: str = "") -> Codebase:
        """The codebase a task names: its snapshot if it has one, else its repo at its base
        commit. Raises NoCodebase."""
        if not self.root.is_dir():
            raise NoCodebase(f"the codebase store {self.root} is not a folder")
        if snapshot:
            return self._snapshot(snapshot)
        if repo and base_commit:
            return self._commit(repo, base_commit)
        raise NoCodebase("the task names no codebase (task.repo and task.base_commit, or task.snapshot)")

    def environment(self, repo: str) -> dict | None:
        """The store's environment for `repo`, if it gives one."""
        path = self.root / ENVIRONMENTS
        if not repo or not path.is_file():
            return None
        try:
            environments = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise NoCodebase(f"{ENVIRONMENTS} of the codebase store cannot be read: {error}") from None
        found = environments.get(repo) if isinstance(environments, dict) else None
        return found if isinstance(found, dict) else None

    # --- snapshots -------------------------------------------------------------------------

    def _snapshot(self, snapshot: str) -> Codebase:
        name = PurePosixPath(snapshot)
        if name.is_absolute() or ".." in name.parts:
            raise NoCodebase(f"task.snapshot {snapshot!r} is not a path inside the codebase store")
        path = self.root / name
        root, resolved = self.root.resolve(), path.resolve()
        if not resolved.is_relative_to(root):
            raise NoCodebase(f"task.snapshot {snapshot!r} leads out of the codebase store")
        if resolved == root:
            raise NoCodebase(f"task.snapshot {snapshot!r} is the codebase store itself, not a codebase in it")
        _refuse_git(snapshot, resolved, root)
        if path.is_dir():
            digest = _folder_digest(path)
            return self._cached(f"snapshot:{snapshot}@{digest}", lambda into: _copy_folder(path, into))
        if not path.is_file():
            raise NoCodebase(f"task.snapshot {snapshot!r} is not in the codebase store {self.root}")
        if not snapshot.lower().endswith(ARCHIVES):
            raise NoCodebase(f"task.snapshot {snapshot!r} is neither a folder nor an archive ({', '.join(ARCHIVES)})")
        digest = _file_digest(path)
        return self._cached(f"snapshot:{snapshot}@{digest}", lambda into: _unpack(path, into))

    # --- git mirrors -----------------------------------------------------------------------

    def _commit(self, repo: str, base_commit: str) -> Codebase:
        mirror = self._mirror(repo)
        resolved = _git(mirror, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{base_commit}^{{commit}}")
        if resolved.returncode != 0:
            raise NoCodebase(f"commit {base_commit} is not in the mirror of {repo} ({mirror.name})")
        commit = resolved.stdout.decode().strip()

        def export(into: Path) -> None:
            archive = _git(mirror, "archive", "--format=tar", commit)
            if archive.returncode != 0:
                raise NoCodebase(f"git archive of {repo}@{commit}: {archive.stderr.decode(errors='replace')}")
            with tempfile.TemporaryFile() as tar:
                tar.write(archive.stdout)
                tar.seek(0)
                with tarfile.open(fileobj=tar) as opened:
                    _extract_tar(opened, into, f"{repo}@{commit}")

        return self._cached(f"{repo}@{commit}", export)

    def _mirror(self, repo: str) -> Path:
        parts = PurePosixPath(repo).parts
        if not parts or PurePosixPath(repo).is_absolute() or ".." in parts:
            raise NoCodebase(f"task.repo {repo!r} cannot name a mirror")
        flat = "__".join(parts)
        for name in (f"{repo}.git", repo, f"{flat}.git", flat):
            path = self.root / name
            if path.is_dir() and _git(path, "rev-parse", "--git-dir").returncode == 0:
                return path
        raise NoCodebase(f"no mirror of {repo} in the codebase store {self.root}")

    # --- the cache -------------------------------------------------------------------------

    def _cached(self, codebase_id: str, make) -> Codebase:
        """The tree of `codebase_id`, made by `make(into)` the first time. Made aside and
        renamed into place, so that two workers making it at once both end with one whole tree."""
        folder = self.cache / hashlib.sha256(codebase_id.encode()).hexdigest()[:32]
        tree = folder / "tree"
        if not tree.is_dir():
            self.cache.mkdir(parents=True, exist_ok=True)
            self.cache.chmod(0o755)
            draft = Path(tempfile.mkdtemp(prefix=".draft-", dir=self.cache))
            try:
                draft.chmod(0o755)
                (draft / "tree").mkdir(mode=0o755)
                make(draft / "tree")
                (draft / "id").write_text(codebase_id)
                try:
                    os.rename(draft, folder)
                except OSError:  # made meanwhile by another worker: theirs is the same tree
                    if not tree.is_dir():
                        raise
            finally:
                shutil.rmtree(draft, ignore_errors=True)
        return Codebase(codebase_id, tree, _listing(tree))


def _refuse_git(snapshot: str, path: Path, root: Path) -> None:
    """Raise NoCodebase when `path` lies in a git repository of the store (a mirror, a
    clone's .git) or, a folder, holds one: the store's mirrors are read through git only."""
    for folder in (path, *path.parents):
        if folder == root:
            break
        if _is_git_dir(folder):
            raise NoCodebase(f"task.snapshot {snapshot!r} lies in the git repository "
                             f"{folder.relative_to(root)}: a snapshot is an archive or a source "
                             "folder (a mirror is named by task.repo and task.base_commit)")
    if not path.is_dir():
        return
    for folder, subfolders, files in os.walk(path):
        held = [Path(folder, name) for name in subfolders + files
                if name == ".git" or (name in subfolders and _is_git_dir(Path(folder, name)))]
        if held:
            raise NoCodebase(f"task.snapshot {snapshot!r} holds the git repository "
                             f"{held[0].relative_to(root)}: a snapshot is an archive or a source "
                             "folder (a mirror is named by task.repo and task.base_commit)")


def _is_git_dir(folder: Path) -> bool:
    """A clone's .git, or a bare repository (what git itself looks for: HEAD, objects, refs)."""
    return folder.name == ".git" or ((folder / "HEAD").is_file() and (folder / "objects").is_dir()
                                     and (folder / "refs").is_dir())


def _git(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(path), *args], capture_output=True)


def _listing(tree: Path) -> tuple[str, ...]:
    files = []
    for folder, subfolders, names in os.walk(tree):
        subfolders[:] = [s for s in subfolders if s not in _NOT_CODE]
        base = Path(folder).relative_to(tree)
        files += [(base / name).as_posix() for name in names]
    return tuple(sorted(files))


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _folder_digest(folder: Path) -> str:
    """A digest of every file's path and content (links by their target): a folder changed in
    place is another codebase."""
    digest = hashlib.sha256()
    for name in _listing(folder):
        path = folder / name
        digest.update(name.encode() + b"\0")
        if path.is_symlink():
            digest.update(b"link:" + os.readlink(path).encode())
        else:
            digest.update(_file_digest(path).encode())
    return digest.hexdigest()


def _copy_folder(source: Path, into: Path) -> None:
    shutil.rmtree(into)
    shutil.copytree(source, into, symlinks=True, ignore=shutil.ignore_patterns(*_NOT_CODE))


def _unpack(path: Path, into: Path) -> None:
    where = path.name
    try:
        if path.name.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():
                    name = PurePosixPath(member)
                    if name.is_absolute() or ".." in name.parts:
                        raise NoCodebase(f"snapshot {where}: member {member!r} leads out of the tree")
                archive.extractall(into)
        else:
            with tarfile.open(path) as archive:
                _extract_tar(archive, into, where)
        _lift_single_folder(into)
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as error:
        raise NoCodebase(f"snapshot {where} cannot be unpacked: {error}") from None


def _lift_single_folder(tree: Path) -> None:
    """An archive of one top-level folder (`name-1.2/...`, as a release tarball has it): its
    content is the tree."""
    entries = list(tree.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        inner = entries[0].rename(tree.parent / ".lifted")
        tree.rmdir()
        inner.rename(tree)


def _extract_tar(archive: tarfile.TarFile, into: Path, where: str) -> None:
    # The "data" filter refuses absolute names, names and links that lead out of the tree,
    # and device files.
    try:
        archive.extractall(into, filter="data")
    except tarfile.FilterError as error:
        raise NoCodebase(f"snapshot {where}: {error}") from None
