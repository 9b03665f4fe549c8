"""Run folders sent as one archive (.zip, .tar, .tar.gz, .tgz): an upload keeps no folders,
and SWE-agent and OpenHands name each run by its folder.

An archive comes from whoever uploads it, so it is unpacked with care: a member must be a
plain file or folder (no link, no device) whose name stays inside the folder it is unpacked
into (not absolute, no ``..``), named once; and the archives of one import may unpack to
no more than a ``Budget``'s bytes in all, in at most one member per 512 bytes of it (a tar
takes a 512-byte block per member, so no archive within the limit needs more; a zip bomb,
small packed and huge unpacked, stops at the limit). Problems name the archive and its member
(``runs.zip: ../x.traj: name: ...``); unpacking stops at the first, and the caller
removes the folder.

The archive's top-level folders are its runs, in the order of their names.
"""

from __future__ import annotations

import re
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from grading.jsonl import ErrorLog

SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
BLOCK = 512  # a tar's header per member: the member count is capped at max_bytes // BLOCK
CHUNK = 1024 * 1024


class _Refused(Exception):
    """A member, or the archive, that cannot be unpacked: ``where`` and ``field: reason``."""

    def __init__(self, where: str, field: str, reason: str):
        super().__init__(reason)
        self.where, self.field, self.reason = where, field, reason


def is_archive(name: str) -> bool:
    return name.lower().endswith(SUFFIXES)


class Budget:
    """What the archives of one import may unpack to, in all."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes, self.bytes_left, self.members_left = max_bytes, max_bytes, max_bytes // BLOCK


def unpack_runs(path: str | Path, name: str, into: Path, *, budget: Budget, errors: ErrorLog) -> list[Path]:
    """The run folders of the archive at ``path`` (called ``name`` in errors), unpacked into
    the empty folder ``into``; none, with the reason in ``errors``, when it cannot be."""
    try:
        _Unpacker(name, into, budget).unpack(Path(path))
    except _Refused as refused:
        errors.add(refused.where, None, refused.field, refused.reason)
        return []
    except (zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError, NotImplementedError, RuntimeError,
            OSError) as exc:  # a damaged, encrypted or oddly packed archive
        errors.add(name, None, "archive", f"cannot be unpacked: {exc}")
        return []
    return _runs(into, name, errors)


def _runs(into: Path, name: str, errors: ErrorLog) -> list[Path]:
    runs, loose = [], []
    for entry in sorted(into.iterdir()):
        (runs if entry.is_dir() else loose).append(entry)
    for entry in loose:
        errors.add(f"{name}: {entry.name}", None, "member",
                   "not in a run folder: the archive's top-level folders are the runs")
    if not runs and not loose:
        errors.add(name, None, "archive", "holds no run folder")
    return runs if not loose else []


class _Unpacker:
    def __init__(self, name: str, into: Path, budget: Budget) -> None:
        self.name, self.into, self.budget = name, into, budget
        self.seen: set[PurePosixPath] = set()

    def unpack(self, path: Path) -> None:
        if self.name.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                for info in archive.infolist():
                    relative = self._member(info.filename, _zip_kind(info))
                    if relative is not None:
                        with archive.open(info) as data:
                            self._write(relative, data)
            return
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                relative = self._member(member.name, _tar_kind(member))
                if relative is not None:
                    with archive.extractfile(member) as data:
                        self._write(relative, data)

    def _member(self, name: str, kind: str) -> PurePosixPath | None:
        """Where a file member goes (None for a folder, made here), or refused: a member of
        another kind, a name that leaves ``into`` or comes twice, one member too many."""
        where = f"{self.name}: {name}"
        self.budget.members_left -= 1
        if self.budget.members_left < 0:
            raise _Refused(self.name, "archive", f"more than {self.budget.max_bytes // BLOCK} members to "
                                                 f"unpack, one per {BLOCK} bytes of the upload limit")
        if kind not in ("file", "folder"):
            raise _Refused(where, "member", f"is a {kind}; only files and folders are unpacked")
        relative = _safe_name(name, where, kind)
        if relative in self.seen:
            raise _Refused(where, "name", "appears twice in the archive")
        self.seen.add(relative)
        if kind == "folder":
            (self.into / relative).mkdir(parents=True, exist_ok=True)
            return None
        return relative

    def _write(self, relative: PurePosixPath, data: BinaryIO) -> None:
        target = self.into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as out:
            while chunk := data.read(min(CHUNK, self.budget.bytes_left + 1)):
                self.budget.bytes_left -= len(chunk)
                if self.budget.bytes_left < 0:
                    raise _Refused(f"{self.name}: {relative}", "size", f"more than {self.budget.max_bytes} "
                                   "bytes to unpack, the upload limit")
                out.write(chunk)


_DRIVE = re.compile(r"^[A-Za-z]:")


def _safe_name(name: str, where: str, kind: str) -> PurePosixPath:
    """``name`` as a path inside the unpacking folder, or refused. ``./`` names the folder
    itself (``tar -C run -cf runs.tar .``)."""
    if "\\" in name or _DRIVE.match(name):
        raise _Refused(where, "name", "is a Windows path; archive names use /")
    if name.startswith("/"):
        raise _Refused(where, "name", "is absolute; archive names must be relative")
    path = PurePosixPath(name)
    if ".." in path.parts:
        raise _Refused(where, "name", "leaves the archive's folder (..)")
    if not path.parts and kind == "file":
        raise _Refused(where, "name", "is empty")
    return path


def _zip_kind(info: zipfile.ZipInfo) -> str:
    mode = info.external_attr >> 16  # the Unix mode, when a Unix tool made the archive
    if info.is_dir():
        return "folder"
    if info.create_system != 3 or stat.S_IFMT(mode) in (0, stat.S_IFREG):  # 0: the type left out
        return "file"
    return "symbolic link" if stat.S_ISLNK(mode) else "device or special file"


def _tar_kind(member: tarfile.TarInfo) -> str:
    if member.isfile():
        return "file"
    if member.isdir():
        return "folder"
    if member.issym():
        return "symbolic link"
    if member.islnk():
        return "hard link"
    return "device or special file"
