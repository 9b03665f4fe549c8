"""A candidate's patch on a private copy: applied as `git apply` would, or refused with the
file and the rule, before anything runs."""

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from grading.sandbox import PatchRefused, prepare_workdir, remove_tree
from grading.sandbox.patches import patch_paths

EDIT = """\
diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
 def answer():
-    return 41
+    return 42
"""


def new_file(path, text="x\n", mode="100644"):
    return (f"diff --git a/{path} b/{path}\nnew file mode {mode}\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1 @@\n+{text.rstrip(chr(10))}\n")


def new_symlink(path, target):
    return (f"diff --git a/{path} b/{path}\nnew file mode 120000\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n")


@pytest.fixture
def codebase(tmp_path):
    folder = tmp_path / "codebase"
    folder.mkdir()
    (folder / "app.py").write_text("def answer():\n    return 41\n")
    return folder


def git_init(folder):
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run(["git", "-C", str(folder), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "base"], check=True)


def test_a_patch_applies_to_a_copy_of_a_plain_folder_and_leaves_the_codebase_alone(codebase, tmp_path):
    workdir = prepare_workdir(codebase, EDIT, into=tmp_path / "work")
    assert (workdir / "app.py").read_text() == "def answer():\n    return 42\n"
    assert (codebase / "app.py").read_text() == "def answer():\n    return 41\n"


def test_a_patch_applies_to_a_copy_of_a_git_checkout_which_keeps_its_history(codebase, tmp_path):
    git_init(codebase)
    workdir = prepare_workdir(codebase, EDIT + new_file("docs/new.md"), into=tmp_path / "work")
    status = subprocess.run(["git", "status", "--porcelain"], cwd=workdir, capture_output=True,
                            text=True, check=True).stdout
    assert status.splitlines() == [" M app.py", "?? docs/"]


def test_a_plain_folder_inside_another_repository_is_patched_at_its_own_root(codebase, tmp_path):
    git_init(tmp_path)  # without a ceiling, git would apply relative to this outer root
    (tmp_path / "copies").mkdir()
    workdir = prepare_workdir(codebase, EDIT, into=tmp_path / "copies" / "work")
    assert "return 42" in (workdir / "app.py").read_text()


def test_an_empty_patch_changes_nothing(codebase, tmp_path):
    workdir = prepare_workdir(codebase, "\n", into=tmp_path / "work")
    assert (workdir / "app.py").read_text() == (codebase / "app.py").read_text()


def test_a_patch_that_does_not_apply_is_refused_with_gits_reason_and_the_copy_removed(codebase, tmp_path):
    with pytest.raises(PatchRefused, match="does not apply: .*app.py") as refused:
        prepare_workdir(codebase, EDIT.replace("41", "40"), into=tmp_path / "work")
    assert refused.value.path == ""
    assert not (tmp_path / "work").exists()


def test_a_patch_that_fails_half_way_applies_nothing(codebase, tmp_path):
    broken = new_file("first.txt") + EDIT.replace("41", "40")
    with pytest.raises(PatchRefused, match="does not apply"):
        prepare_workdir(codebase, broken, into=tmp_path / "work")
    assert not (codebase / "first.txt").exists()


@pytest.mark.parametrize("patch, path, rule", [
    (new_file("../escape.txt"), "../escape.txt", "'..'"),
    (new_file("src/../../escape.txt"), "src/../../escape.txt", "'..'"),
    ("--- /dev/null\n+++ /etc/cron.d/evil\n@@ -0,0 +1 @@\n+x\n", "/etc/cron.d/evil", "absolute"),
    ("diff --git a//etc/passwd b//etc/passwd\n", "/etc/passwd", "absolute"),
    (new_file(".git/hooks/post-checkout"), ".git/hooks/post-checkout", ".git"),
    ("diff --git a/app.py b/../app.py\nsimilarity index 100%\nrename from app.py\nrename to ../app.py\n",
     "../app.py", "'..'"),
    ('diff --git "a/\\056\\056/x" "b/\\056\\056/x"\n', "../x", "'..'"),
])
def test_a_path_that_leaves_the_tree_is_refused_before_anything_is_copied(codebase, tmp_path, patch, path, rule):
    with pytest.raises(PatchRefused, match=rule) as refused:
        prepare_workdir(codebase, patch, into=tmp_path / "work")
    assert refused.value.path == path
    assert not (tmp_path / "work").exists()


def test_a_new_symlink_out_of_the_tree_then_a_write_through_it_is_refused(codebase, tmp_path):
    patch = new_symlink("etc", "/etc") + new_file("etc/evil.conf")
    with pytest.raises(PatchRefused, match="symlink to '/etc'") as refused:
        prepare_workdir(codebase, patch, into=tmp_path / "work")
    assert refused.value.path == "etc"
    assert not (tmp_path / "work").exists()


def test_a_relative_symlink_that_climbs_out_is_refused(codebase, tmp_path):
    with pytest.raises(PatchRefused, match="symlink to '../../outside' leaves the tree"):
        prepare_workdir(codebase, new_symlink("src/link", "../../outside"), into=tmp_path / "work")


def binary_symlink(path, target, scratch):
    """A GIT binary patch that creates the symlink `path` -> `target`: `git diff --binary`
    of a file marked binary holding the target, its mode then set to a symlink's (git
    writes a symlink's own diff as text)."""
    repo = scratch / "binary-patch"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".git" / "info" / "attributes").write_text(f"{path} binary\n")
    (repo / path).write_text(target)
    subprocess.run(["git", "-C", str(repo), "add", path], check=True)
    diff = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--binary"],
                          check=True, capture_output=True, text=True).stdout
    assert "GIT binary patch" in diff
    return diff.replace("new file mode 100644", "new file mode 120000")


def test_a_symlink_in_a_binary_patch_is_refused_before_anything_is_copied(codebase, tmp_path):
    patch = binary_symlink("passwd", "/etc/passwd", tmp_path)
    with pytest.raises(PatchRefused, match="not in the patch as text") as refused:
        patch_paths(patch)
    assert refused.value.path == "passwd"
    with pytest.raises(PatchRefused, match="passwd: a symlink whose target"):
        prepare_workdir(codebase, patch, into=tmp_path / "work")
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("mode", ["0120000", "120000 ", "120755"])
def test_a_symlink_out_of_the_tree_is_refused_however_its_mode_is_spelled(codebase, tmp_path, mode):
    """git reads these as a symlink's mode; the copy, once patched, is what is checked."""
    patch = new_file("passwd", "/etc/passwd", mode=mode).replace(
        "+/etc/passwd\n", "+/etc/passwd\n\\ No newline at end of file\n")
    with pytest.raises(PatchRefused, match="symlink to '/etc/passwd' leaves the tree") as refused:
        prepare_workdir(codebase, patch, into=tmp_path / "work")
    assert refused.value.path == "passwd"
    assert not (tmp_path / "work").exists()


def test_a_loop_of_symlinks_inside_the_tree_is_applied(codebase, tmp_path):
    patch = new_symlink("loop_a", "loop_b") + new_symlink("loop_b", "loop_a")
    workdir = prepare_workdir(codebase, patch, into=tmp_path / "work")
    assert os.readlink(workdir / "loop_a") == "loop_b"


def test_a_symlink_within_the_tree_is_applied(codebase, tmp_path):
    workdir = prepare_workdir(codebase, new_symlink("docs/app", "../app.py"), into=tmp_path / "work")
    assert (workdir / "docs" / "app").resolve() == (workdir / "app.py").resolve()


def test_a_write_through_a_codebase_symlink_that_leaves_the_tree_is_refused(codebase, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (codebase / "vendor").symlink_to(outside)
    with pytest.raises(PatchRefused, match="through a symlink out of the tree") as refused:
        prepare_workdir(codebase, new_file("vendor/evil.py"), into=tmp_path / "work")
    assert refused.value.path == "vendor/evil.py"
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "work").exists()


def test_removed_lines_that_look_like_headers_are_not_read_as_file_names():
    patch = ("--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,1 @@\n--- /etc/passwd\n select 1;\n")
    assert patch_paths(patch) == ["q.sql"]


def test_names_with_spaces_tabs_and_quotes_are_read_as_git_writes_them():
    patch = (new_file("sp ace.txt").replace("+++ b/sp ace.txt", "+++ b/sp ace.txt\t")
             + 'diff --git "a/q\\tt" "b/q\\tt"\nnew file mode 100644\n')
    assert patch_paths(patch) == ["sp ace.txt", "q\tt"]


def locked_tree_removed(scratch: Path) -> bool:
    """Build a tree as a candidate's `chmod 000` leaves it, remove it; whether it is gone."""
    tree = scratch / "tree"
    (tree / "locked" / "deeper").mkdir(parents=True)
    (tree / "locked" / "deeper" / "file.py").write_text("x = 1")
    (tree / "read_only").mkdir()
    (tree / "read_only" / "kept.txt").write_text("")
    os.chmod(tree / "locked" / "deeper", 0o000)
    os.chmod(tree / "locked", 0o500)
    os.chmod(tree / "read_only", 0o555)
    remove_tree(tree)
    return not tree.exists()


def test_a_tree_whose_code_took_away_its_folders_permissions_is_still_removed():
    # Removed by a user that is not root (root ignores permissions): a worker's own user, here
    # nobody in a forked child when the tests run as root.
    scratch = Path(tempfile.mkdtemp(dir="/var/tmp"))
    scratch.chmod(0o777)
    try:
        if os.getuid() != 0:
            assert locked_tree_removed(scratch)
            return
        child = os.fork()
        if child == 0:
            try:
                os.setgid(65534)
                os.setuid(65534)
                os._exit(0 if locked_tree_removed(scratch) else 1)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        subprocess.run(["rm", "-rf", str(scratch)], check=True)
