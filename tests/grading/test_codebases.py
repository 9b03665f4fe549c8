"""The codebase store: a task's code from a git mirror at its commit or from a snapshot, made once
in a cache, and a reason whenever it cannot be had; and what a task says about running it."""

import io
import json
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from grading.execution import CodebaseStore, NoCodebase, task_execution
from grading.execution.task import reward_tests
from grading.sandbox import SandboxConfig, SandboxConfigError, check_backend

ENVIRONMENT = {"test_command": "python -m pytest -rA {tests}", "report": "pytest"}


def git(folder, *args):
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    work = tmp_path / "work"
    work.mkdir(parents=True)
    git(work, "init", "-q")
    (work / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    first = git(work, "rev-parse", "HEAD")
    (work / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    (work / "tests").mkdir()
    (work / "tests" / "test_calc.py").write_text("def test_add():\n    pass\n")
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "two")
    (root / "acme").mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--mirror", str(work), str(root / "acme" / "calc.git")], check=True)
    return CodebaseStore(root, tmp_path / "cache"), first, git(work, "rev-parse", "HEAD")


def test_a_repo_at_a_commit_is_its_tree_there_named_by_the_full_commit(store):
    codebases, first, second = store
    old = codebases.checkout(repo="acme/calc", base_commit=first[:10])
    assert old.id == f"acme/calc@{first}"
    assert old.files == ("calc.py",)
    assert (old.path / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    new = codebases.checkout(repo="acme/calc", base_commit=second)
    assert new.files == ("calc.py", "tests/test_calc.py") and new.path != old.path
    assert codebases.checkout(repo="acme/calc", base_commit=second).path == new.path  # made once


def test_a_mirror_may_be_named_flat_and_a_missing_one_or_commit_is_a_reason(store, tmp_path):
    codebases, first, _ = store
    (codebases.root / "acme" / "calc.git").rename(codebases.root / "acme__calc.git")
    assert codebases.checkout(repo="acme/calc", base_commit=first).files == ("calc.py",)
    with pytest.raises(NoCodebase, match="no mirror of acme/other in the codebase store"):
        codebases.checkout(repo="acme/other", base_commit=first)
    with pytest.raises(NoCodebase, match="commit 1234567 is not in the mirror of acme/calc"):
        codebases.checkout(repo="acme/calc", base_commit="1234567")
    with pytest.raises(NoCodebase, match="cannot name a mirror"):
        codebases.checkout(repo="../acme/calc", base_commit=first)
    with pytest.raises(NoCodebase, match="names no codebase"):
        codebases.checkout(repo="acme/calc")
    with pytest.raises(NoCodebase, match="is not a folder"):
        CodebaseStore(tmp_path / "nowhere", tmp_path / "cache").checkout(repo="acme/calc", base_commit=first)


def tar_of(files: dict, *, links=()) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
        for name, target in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


def test_a_snapshot_is_an_archive_or_a_folder_named_by_its_content(tmp_path):
    root = tmp_path / "store"
    (root / "snaps").mkdir(parents=True)
    (root / "snaps" / "calc.tar.gz").write_bytes(tar_of({"calc-1.0/calc.py": "x = 1\n", "calc-1.0/README": ""},
                                                        links=[("calc-1.0/here", "calc.py")]))
    with zipfile.ZipFile(root / "snaps" / "calc.zip", "w") as archive:
        archive.writestr("calc.py", "x = 2\n")
    (root / "folder").mkdir()
    (root / "folder" / "calc.py").write_text("x = 3\n")
    codebases = CodebaseStore(root, tmp_path / "cache")

    tarred = codebases.checkout(snapshot="snaps/calc.tar.gz")
    assert tarred.files == ("README", "calc.py", "here")  # its one top-level folder is the tree
    assert (tarred.path / "here").is_symlink() and tarred.id.startswith("snapshot:snaps/calc.tar.gz@")
    assert (codebases.checkout(snapshot="snaps/calc.zip").path / "calc.py").read_text() == "x = 2\n"
    folder = codebases.checkout(snapshot="folder")
    (root / "folder" / "calc.py").write_text("x = 4\n")
    changed = codebases.checkout(snapshot="folder")
    assert changed.id != folder.id and (changed.path / "calc.py").read_text() == "x = 4\n"


@pytest.mark.parametrize(("members", "links", "reason"), [
    ({"../up.py": ""}, (), "outside the destination"),
    ({"a.py": ""}, [("out", "/etc/passwd")], "absolute path"),
    ({"a.py": ""}, [("out", "../../outside")], "outside the destination"),
])
def test_a_snapshot_that_leads_out_of_its_tree_is_refused(tmp_path, members, links, reason):
    root = tmp_path / "store"
    root.mkdir()
    (root / "bad.tgz").write_bytes(tar_of(members, links=links))
    codebases = CodebaseStore(root, tmp_path / "cache")
    with pytest.raises(NoCodebase, match=f"snapshot bad.tgz: .*{reason}"):
        codebases.checkout(snapshot="bad.tgz")
    assert not any((tmp_path / "cache").glob("*/tree"))
    assert not (tmp_path / "up.py").exists()


def test_an_absolute_member_lands_inside_the_tree(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    (root / "abs.tgz").write_bytes(tar_of({"/etc/cron.d/gagar-test": "x", "a.py": ""}))
    tree = CodebaseStore(root, tmp_path / "cache").checkout(snapshot="abs.tgz")
    assert tree.files == ("a.py", "etc/cron.d/gagar-test")
    assert not Path("/etc/cron.d/gagar-test").exists()


def test_a_snapshot_outside_the_store_or_missing_is_a_reason(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    (root / "away").symlink_to(tmp_path)
    codebases = CodebaseStore(root, tmp_path / "cache")
    with pytest.raises(NoCodebase, match="leads out of the codebase store"):
        codebases.checkout(snapshot="away")
    with pytest.raises(NoCodebase, match="is not a path inside"):
        codebases.checkout(snapshot="../x.tar")
    with pytest.raises(NoCodebase, match="'gone.tar' is not in the codebase store"):
        codebases.checkout(snapshot="gone.tar")


@pytest.mark.parametrize(("snapshot", "reason"), [
    (".", "'.' is the codebase store itself"),
    ("acme/calc.git", "lies in the git repository acme/calc.git"),
    ("acme/calc.git/refs", "lies in the git repository acme/calc.git"),
    ("acme", "holds the git repository acme/calc.git"),
    ("clone", r"holds the git repository clone/\.git"),
    ("clone/.git", r"lies in the git repository clone/\.git"),
    ("link-to-mirror", "lies in the git repository acme/calc.git"),
])
def test_a_snapshot_that_names_a_mirror_or_the_store_itself_is_a_reason(store, tmp_path, snapshot, reason):
    """A task names any path it likes: a mirror's config (its remote URL may carry a token)
    must never be copied where a run, and its log, can read it."""
    codebases, _, _ = store
    git(codebases.root / "acme" / "calc.git", "config", "remote.origin.url", "https://x:token@example.com/calc")
    subprocess.run(["git", "clone", "-q", str(codebases.root / "acme" / "calc.git"), str(codebases.root / "clone")],
                   check=True)
    (codebases.root / "link-to-mirror").symlink_to(codebases.root / "acme" / "calc.git")
    with pytest.raises(NoCodebase, match=f"task.snapshot .*{reason}"):
        codebases.checkout(snapshot=snapshot)
    assert not any((tmp_path / "cache").glob("*/tree"))


def test_the_store_may_give_a_repositorys_environment(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    (root / "environments.json").write_text(json.dumps({"acme/calc": ENVIRONMENT}))
    codebases = CodebaseStore(root, tmp_path / "cache")
    assert codebases.environment("acme/calc") == ENVIRONMENT and codebases.environment("acme/x") is None
    execution = task_execution({}, store_environment=codebases.environment("acme/calc"))
    assert execution.environment.report == "pytest"
    assert task_execution({"environment": {**ENVIRONMENT, "report": "exit_code"}},
                          store_environment=ENVIRONMENT).environment.report == "exit_code"  # the task's first


def test_a_task_without_an_environment_or_with_a_bad_one_is_a_reason():
    with pytest.raises(NoCodebase, match="the task has no environment"):
        task_execution({})
    with pytest.raises(NoCodebase, match="task.environment.test_command: has no {tests} placeholder"):
        task_execution({"environment": {"test_command": "pytest"}})


@pytest.mark.parametrize("image", ["--privileged", "--volume=/:/host", "-v/:/host"])
def test_an_image_that_could_read_as_a_runtime_option_is_a_reason(image):
    with pytest.raises(NoCodebase, match=rf"task.environment.image: '{image}' is not an image reference"):
        task_execution({"environment": {**ENVIRONMENT, "image": image}})
    assert task_execution({"environment": {**ENVIRONMENT, "image": "team/task:1"}}).environment.image == "team/task:1"


def test_the_reward_tests_are_the_tasks_else_swe_benchs_else_the_trajectories_own():
    assert reward_tests({"reward_tests": ["b", "a", "b"], "FAIL_TO_PASS": ["x"]}) == ("b", "a")
    task = {"FAIL_TO_PASS": '["t::f"]', "PASS_TO_PASS": ["t::p", "t::f"]}  # the dataset's JSON text, or a list
    assert reward_tests(task) == ("t::f", "t::p")
    assert reward_tests({}, [{"passed": ["b"], "failed": ["a"]}, None, {"passed": ["b"]}]) == ("a", "b")
    with pytest.raises(NoCodebase, match="task.FAIL_TO_PASS: neither a list nor the JSON text of one"):
        reward_tests({"FAIL_TO_PASS": "t::f"})


def test_a_command_template_with_each_tasks_image_is_checked_without_a_trial_run():
    check_backend(SandboxConfig("command", template="sh -c {command} {image}"))
    with pytest.raises(SandboxConfigError, match="'no-such-runtime' is not installed"):
        check_backend(SandboxConfig("command", template="no-such-runtime run {image} {command}"))
    with pytest.raises(SandboxConfigError, match="no {command} word"):
        check_backend(SandboxConfig("command", template="docker run {image}"))
