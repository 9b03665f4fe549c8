"""Archives of run folders are unpacked with care: links, devices, names leaving the folder
and bombs are refused by member, and nothing else is unpacked."""

import io
import tarfile
import zipfile

import pytest

from grading.formats.archives import Budget, unpack_runs
from grading.jsonl import ErrorLog

MB = 1024 * 1024


def zip_of(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def tar_of(path, members: list[tarfile.TarInfo], data: dict[str, bytes] = {}):  # noqa: B006 (read only)
    with tarfile.open(path, "w:gz") as archive:
        for member in members:
            content = data.get(member.name, b"")
            member.size = len(content) if member.isfile() else 0
            archive.addfile(member, io.BytesIO(content) if member.isfile() else None)
    return path


def entry(name: str, kind=tarfile.REGTYPE, **fields) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type = kind
    for key, value in fields.items():
        setattr(member, key, value)
    return member


def unpack(path, tmp_path, max_bytes=MB):
    errors = ErrorLog()
    into = tmp_path / "into"
    into.mkdir(parents=True)
    runs = unpack_runs(path, path.name, into, budget=Budget(max_bytes), errors=errors)
    return runs, errors.messages, into


def test_the_top_level_folders_are_the_runs_in_name_order(tmp_path):
    archive = zip_of(tmp_path / "runs.zip", {"run-b/i1.traj": b"{}", "run-a/deep/i1.traj": b"{}", "run-a/": b""})
    runs, errors, into = unpack(archive, tmp_path)
    assert errors == []
    assert [run.name for run in runs] == ["run-a", "run-b"]
    assert (into / "run-a" / "deep" / "i1.traj").read_bytes() == b"{}"


def test_a_tar_gz_made_from_inside_a_folder_unpacks(tmp_path):
    archive = tar_of(tmp_path / "runs.tgz", [entry("./", tarfile.DIRTYPE), entry("./run-a/i1.traj")],
                     {"./run-a/i1.traj": b"{}"})
    runs, errors, _ = unpack(archive, tmp_path)
    assert (errors, [run.name for run in runs]) == ([], ["run-a"])


@pytest.mark.parametrize(("name", "reason"), [
    ("../evil.traj", "runs.zip: ../evil.traj: name: leaves the archive's folder (..)"),
    ("run-a/../../evil.traj", "runs.zip: run-a/../../evil.traj: name: leaves the archive's folder (..)"),
    ("/etc/evil.traj", "runs.zip: /etc/evil.traj: name: is absolute; archive names must be relative"),
    ("C:/evil.traj", "runs.zip: C:/evil.traj: name: is a Windows path; archive names use /"),
])
def test_a_name_leaving_the_folder_is_refused_and_nothing_is_written_outside(tmp_path, name, reason):
    archive = zip_of(tmp_path / "runs.zip", {"run-a/ok.traj": b"{}", name: b"{}"})
    runs, errors, _ = unpack(archive, tmp_path)
    assert (runs, errors) == ([], [reason])
    assert not (tmp_path / "evil.traj").exists()


def test_links_and_devices_are_refused(tmp_path):
    for kind, fields, said in [(tarfile.SYMTYPE, {"linkname": "/etc/passwd"}, "symbolic link"),
                               (tarfile.LNKTYPE, {"linkname": "run-a/ok.traj"}, "hard link"),
                               (tarfile.CHRTYPE, {"devmajor": 1, "devminor": 3}, "device or special file")]:
        archive = tar_of(tmp_path / f"{kind.decode()}.tar.gz", [entry("run-a/ok.traj"), entry("run-a/x.traj", kind,
                                                                                               **fields)])
        errors = ErrorLog()
        into = tmp_path / f"into-{kind.decode()}"
        into.mkdir()
        assert unpack_runs(archive, "runs.tgz", into, budget=Budget(MB), errors=errors) == []
        assert errors.messages == [f"runs.tgz: run-a/x.traj: member: is a {said}; only files and folders are unpacked"]


def test_a_symbolic_link_in_a_zip_is_refused(tmp_path):
    link = zipfile.ZipInfo("run-a/x.traj")
    link.create_system = 3
    link.external_attr = (0o120777 << 16)
    with zipfile.ZipFile(tmp_path / "runs.zip", "w") as archive:
        archive.writestr(link, "/etc/passwd")
    runs, errors, into = unpack(tmp_path / "runs.zip", tmp_path)
    assert errors == ["runs.zip: run-a/x.traj: member: is a symbolic link; only files and folders are unpacked"]
    assert not (into / "run-a" / "x.traj").exists()


def test_a_bomb_stops_at_the_limit(tmp_path):
    archive = zip_of(tmp_path / "runs.zip", {"run-a/big.traj": bytes(20 * MB)})
    assert archive.stat().st_size < 100_000  # small packed, large unpacked
    runs, errors, into = unpack(archive, tmp_path, max_bytes=MB)
    assert (runs, errors) == ([], [f"runs.zip: run-a/big.traj: size: more than {MB} bytes to unpack, the upload limit"])
    assert (into / "run-a" / "big.traj").stat().st_size <= MB + 1


def test_the_limit_is_shared_by_the_archives_of_one_import(tmp_path):
    budget, errors = Budget(1100), ErrorLog()
    for index in range(2):
        archive = zip_of(tmp_path / f"{index}.zip", {f"run-{index}/a.traj": bytes(600)})
        into = tmp_path / f"into-{index}"
        into.mkdir()
        unpack_runs(archive, archive.name, into, budget=budget, errors=errors)
    assert errors.messages == ["1.zip: run-1/a.traj: size: more than 1100 bytes to unpack, the upload limit"]


def test_members_are_capped_by_the_limit_too(tmp_path):
    archive = zip_of(tmp_path / "runs.zip", {f"run-a/{i}.traj": b"" for i in range(5)})
    _, errors, _ = unpack(archive, tmp_path, max_bytes=4 * 512)
    assert errors == ["runs.zip: archive: more than 4 members to unpack, one per 512 bytes of the upload limit"]


def test_loose_files_twice_named_members_and_damaged_archives_are_refused(tmp_path):
    _, errors, _ = unpack(zip_of(tmp_path / "a.zip", {"run-a/x.traj": b"{}", "x.traj": b"{}"}), tmp_path / "a")
    assert errors == ["a.zip: x.traj: member: not in a run folder: the archive's top-level folders are the runs"]
    archive = tar_of(tmp_path / "b.tgz", [entry("run-a/x.traj"), entry("run-a/x.traj")])
    _, errors, _ = unpack(archive, tmp_path / "b")
    assert errors == ["b.tgz: run-a/x.traj: name: appears twice in the archive"]
    (tmp_path / "c.zip").write_bytes(b"not a zip")
    _, errors, _ = unpack(tmp_path / "c.zip", tmp_path / "c")
    assert errors == ["c.zip: archive: cannot be unpacked: File is not a zip file"]
    _, errors, _ = unpack(zip_of(tmp_path / "d.zip", {}), tmp_path / "d")
    assert errors == ["d.zip: archive: holds no run folder"]
