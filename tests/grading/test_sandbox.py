"""Commands run contained: each fault below ends with the sandbox's answer named. Both
backends run the checks that are theirs; the `command` backend is tried with a bwrap
template, as a team would write one for docker or podman."""

import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from grading.sandbox import (
    BwrapSandbox,
    CommandSandbox,
    Limits,
    SandboxConfig,
    SandboxConfigError,
    check_backend,
    make_sandbox,
)
from grading.sandbox.bwrap import SYSTEM_PATHS
from grading.sandbox.limits import ERROR, FAILED, KILLED_MEMORY, KILLED_OUTPUT, PASSED, TIMEOUT
from grading.sandbox.started import STARTED, announced

TEMPLATE = ("bwrap --unshare-all --die-with-parent --clearenv --setenv PATH /usr/bin:/bin "
            "--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind {workdir} /work "
            "--chdir /work -- {command}")
QUICK = Limits(wall_seconds=20)
PRINTS_ENV = """sh -c 'env; exec "$@"' runtime {command}"""
FORK_BOMB = ("import os, time\nrefused = False\nwhile True:\n    try:\n        os.fork()\n"
             "    except OSError as error:\n        if not refused:\n"
             "            print(error, flush=True)\n            refused = True\n"
             "        time.sleep(0.01)\n")
CONNECT = ("import socket, sys\nfor address in [('1.1.1.1', 80), ('127.0.0.1', int(sys.argv[1]))]:\n"
           "    try:\n        socket.create_connection(address, timeout=3)\n"
           "        print('connected', address)\n"
           "    except OSError as error:\n        print(error)\n")


@pytest.fixture(scope="module", autouse=True)
def bwrap_installed():
    check_backend(SandboxConfig("bwrap"))  # scripts/sandbox.sh installs it


@pytest.fixture
def workdir():
    """A copy as prepare_workdir leaves it, in a folder the sandbox's user may enter."""
    parent = Path(tempfile.mkdtemp())
    parent.chmod(0o755)
    folder = parent / "work"
    folder.mkdir()
    (folder / "hello.txt").write_text("hello\n")
    yield folder
    shutil.rmtree(parent)


@pytest.fixture(params=["bwrap", "command"])
def sandbox(request):
    return BwrapSandbox() if request.param == "bwrap" else CommandSandbox(TEMPLATE)


def test_a_command_runs_in_its_workdir_and_its_writes_stay_there(sandbox, workdir):
    result = sandbox.run(workdir, ["sh", "-c", "cat hello.txt && echo 'a  b' > out.txt"], QUICK)
    assert (result.status, result.exit_code, result.output) == (PASSED, 0, "hello\n")
    assert (workdir / "out.txt").read_text() == "a  b\n"


def test_a_failing_command_fails_with_its_exit_code(sandbox, workdir):
    result = sandbox.run(workdir, "echo broken >&2; exit 3", QUICK)
    assert (result.status, result.exit_code, result.output) == (FAILED, 3, "broken\n")


def test_the_result_names_a_command_line_that_runs_it_again(workdir):
    result = BwrapSandbox().run(workdir, ["cat", "hello.txt"], QUICK)
    again = subprocess.run(result.command, shell=True, capture_output=True, text=True)
    assert again.stdout == f"{STARTED}\nhello\n" and result.output == "hello\n"


def test_an_infinite_loop_is_a_timeout(sandbox, workdir):
    result = sandbox.run(workdir, "while :; do :; done", Limits(wall_seconds=1))
    assert result.status == TIMEOUT
    assert 1 <= result.duration < 5


def test_a_gigabyte_of_output_is_cut_at_the_cap_keeping_head_and_tail(sandbox, workdir):
    result = sandbox.run(workdir, "echo first; head -c 1G /dev/zero | tr '\\0' x",
                         Limits(wall_seconds=20, output_bytes=4 * 1024**2))
    assert result.status == KILLED_OUTPUT
    assert result.output.startswith("first\nxxx")
    assert "bytes cut ...]\nxxx" in result.output
    assert len(result.output) < 100_000
    assert result.duration < 10


def test_a_network_connection_is_unreachable_even_to_the_hosts_own_ports(sandbox, workdir):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        result = sandbox.run(workdir, ["python3", "-c", CONNECT, str(port)], QUICK)
        listener.settimeout(0)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert result.status == PASSED
    assert result.output.splitlines() == ["[Errno 101] Network is unreachable",
                                          "[Errno 111] Connection refused"]


def test_writes_outside_the_copy_fail_and_leave_the_host_alone(sandbox, workdir, tmp_path):
    host_file = tmp_path / "codebase.py"
    host_file.write_text("original\n")
    script = (f"echo x > /usr/sandbox-escape; echo x > /etc/sandbox-escape; "
              f"echo x > {host_file}; echo x > /tmp/sandbox-tmp && echo private tmp written")
    result = sandbox.run(workdir, script, QUICK)
    assert result.status == PASSED
    assert result.output.count("Read-only file system") >= 2
    assert "private tmp written" in result.output
    assert host_file.read_text() == "original\n"
    assert not Path("/usr/sandbox-escape").exists() and not Path("/etc/sandbox-escape").exists()
    assert not Path("/tmp/sandbox-tmp").exists()


def test_the_host_folders_outside_the_system_are_not_seen_by_bwrap(workdir, tmp_path):
    (tmp_path / "secret.env").write_text("SECRET_KEY=x\n")
    result = BwrapSandbox().run(workdir, ["cat", str(tmp_path / "secret.env")], QUICK)
    assert result.status == FAILED
    assert "No such file or directory" in result.output


def test_the_workers_environment_does_not_reach_the_command(sandbox, workdir, monkeypatch):
    monkeypatch.setenv("GAGAR_DATABASE_PASSWORD", "hunter2")
    result = sandbox.run(workdir, ["env"], QUICK)
    assert result.status == PASSED
    assert "hunter2" not in result.output


def test_a_fork_bomb_is_held_to_max_processes_while_the_host_still_forks(workdir):
    results = []
    bomb = threading.Thread(target=lambda: results.append(BwrapSandbox().run(
        workdir, ["python3", "-c", FORK_BOMB], Limits(wall_seconds=3, max_processes=64))))
    bomb.start()
    time.sleep(1.5)
    assert subprocess.run(["true"], timeout=5).returncode == 0
    bomb.join()
    [result] = results
    assert result.status == TIMEOUT
    assert "Resource temporarily unavailable" in result.output


def test_nothing_the_command_started_outlives_it(sandbox, workdir):
    result = sandbox.run(workdir, "(sleep 2; echo late > late.txt) & echo started", QUICK)
    assert result.status == PASSED and result.duration < 2
    time.sleep(2.5)
    assert not (workdir / "late.txt").exists()


def test_a_memory_hog_is_killed_memory(workdir):
    hog = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024**2))\n"
    result = BwrapSandbox().run(workdir, ["python3", "-c", hog],
                                Limits(wall_seconds=20, memory_bytes=128 * 1024**2))
    assert result.status == KILLED_MEMORY
    assert result.duration < 10


@pytest.mark.parametrize("folder", ["/tmp", "/dev/shm"])
def test_files_stored_in_memory_backed_folders_count_against_the_memory_limit(workdir, folder):
    fill = f"for n in 1 2 3; do head -c 60M /dev/zero > {folder}/fill$n; done; sleep 5; echo survived"
    result = BwrapSandbox().run(workdir, fill, Limits(wall_seconds=20, memory_bytes=128 * 1024**2))
    assert result.status == KILLED_MEMORY
    assert "survived" not in result.output


def test_the_root_and_dev_are_read_only_so_nothing_is_stored_there(workdir):
    fill = "for folder in / /dev; do head -c 60M /dev/zero > ${folder%/}/fill; done; echo done"
    result = BwrapSandbox().run(workdir, fill, Limits(wall_seconds=20, memory_bytes=128 * 1024**2))
    assert result.status == PASSED
    assert result.output.splitlines() == ["sh: 1: cannot create /fill: Read-only file system",
                                          "sh: 1: cannot create /dev/fill: Read-only file system",
                                          "done"]


def test_tmp_and_dev_shm_serve_an_ordinary_run(workdir):
    """multiprocessing's locks live in /dev/shm; a test's scratch files in /tmp."""
    script = ("python3 -c 'import multiprocessing; multiprocessing.Lock()' && "
              "head -c 20M /dev/zero > /tmp/scratch && head -c 20M /dev/zero > /dev/shm/scratch && "
              "du -m /tmp/scratch /dev/shm/scratch")
    result = BwrapSandbox().run(workdir, script, Limits(wall_seconds=20, memory_bytes=128 * 1024**2))
    assert (result.status, result.output) == (PASSED, "20\t/tmp/scratch\n20\t/dev/shm/scratch\n")


def test_a_folder_past_tmp_bytes_is_full(workdir):
    result = BwrapSandbox().run(workdir, "head -c 8M /dev/zero > /dev/shm/big",
                                Limits(wall_seconds=20, tmp_bytes=4 * 1024**2))
    assert result.status == FAILED
    assert "No space left on device" in result.output


def test_a_file_past_file_bytes_is_cut_off(workdir):
    result = BwrapSandbox().run(workdir, "head -c 4M /dev/zero > big.bin",
                                Limits(wall_seconds=20, file_bytes=1024**2))
    assert result.status == FAILED
    assert (workdir / "big.bin").stat().st_size == 1024**2


def test_a_missing_bwrap_is_a_configuration_error_at_check():
    with pytest.raises(SandboxConfigError, match="'/nonexistent/bwrap' is not installed"):
        check_backend(SandboxConfig("bwrap", bwrap="/nonexistent/bwrap"))


def test_a_missing_container_runtime_is_a_configuration_error_at_check():
    config = SandboxConfig("command", template="no-such-runtime run {image} {command}", image="tests")
    with pytest.raises(SandboxConfigError, match="'no-such-runtime' is not installed"):
        check_backend(config)


def test_a_runtime_that_cannot_run_true_is_a_configuration_error_at_check():
    with pytest.raises(SandboxConfigError, match=r"cannot run `true` \(error\)"):
        check_backend(SandboxConfig("command", template="false {command}"))


@pytest.mark.parametrize("config, reason", [
    (SandboxConfig("docker"), "not one of"),
    (SandboxConfig("command", template="docker run {image} sh"), "no {command} word"),
    (SandboxConfig("command", template="docker run -v {home}:/h {command}"), r"unknown fields \['home'\]"),
])
def test_a_bad_configuration_is_refused_with_its_reason(config, reason):
    with pytest.raises(SandboxConfigError, match=reason):
        check_backend(config)


def test_a_template_that_takes_an_image_runs_only_with_one():
    """At a worker's start each task's image is still to come: `check_backend` checks the
    template's words and its program; a sandbox to run is made with an image only."""
    check_backend(SandboxConfig("command", template="sh -c {command} {image}"))
    with pytest.raises(SandboxConfigError, match="no image given"):
        make_sandbox(SandboxConfig("command", template="sh -c {command} {image}"))


def test_the_template_fills_in_the_workdir_the_image_and_the_limits():
    sandbox = CommandSandbox("docker run --rm --memory {memory_bytes} -v {workdir}:/work {image} {command}",
                             image="team/task:1")
    argv = sandbox.argv(Path("/w d"), ["pytest", "-k", "a b"], Limits(memory_bytes=1000))
    assert argv == ["docker", "run", "--rm", "--memory", "1000", "-v", "/w d:/work", "team/task:1",
                    *announced(["pytest", "-k", "a b"])]


@pytest.mark.parametrize("image", ["--privileged", "--volume=/:/host", "--env-file=/etc/gagar.env",
                                   "team/task:1 --privileged", "team/task:1\n", "Team/Task", "team/task@sha256:abc"])
def test_an_image_that_is_not_an_image_reference_is_refused(image):
    with pytest.raises(SandboxConfigError, match=r"sandbox image: .* is not an image reference"):
        CommandSandbox("docker run --rm {image} {command}", image=image)


@pytest.mark.parametrize("image", ["python", "team/task:1", "registry.example.com:5000/team/task_x:v1.2-rc",
                                   f"ghcr.io/team/task@sha256:{'0' * 64}", "[::1]:5000/task"])
def test_an_image_reference_is_handed_to_the_runtime_as_it_is(image):
    argv = CommandSandbox("docker run --rm {image} {command}", image=image).argv(Path("/w"), ["pytest"], QUICK)
    assert argv == ["docker", "run", "--rm", image, *announced(["pytest"])]


def test_the_workers_secrets_do_not_reach_the_runtime(workdir, monkeypatch):
    """The template's program (here a shell printing its environment, where a team has docker)
    gets PATH and HOME."""
    monkeypatch.setenv("SECRET_KEY", "django-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://gagar:hunter2@db/gagar")
    result = CommandSandbox(PRINTS_ENV).run(workdir, ["true"], QUICK)
    assert result.status == PASSED
    assert sorted(line.split("=", 1)[0] for line in result.output.splitlines()
                  if line.startswith(("PATH=", "HOME="))) == ["HOME", "PATH"]
    assert "django-secret" not in result.output and "hunter2" not in result.output


def test_the_runtime_gets_the_names_the_deployment_lists(workdir, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/docker.sock")
    monkeypatch.setenv("DOCKER_CONFIG", "/etc/gagar/docker")
    sandbox = make_sandbox(SandboxConfig("command", template=PRINTS_ENV, pass_env=("DOCKER_HOST",)))
    output = sandbox.run(workdir, ["true"], QUICK).output.splitlines()
    assert "DOCKER_HOST=unix:///run/docker.sock" in output
    assert not any(line.startswith("DOCKER_CONFIG=") for line in output)


def test_a_listed_name_the_worker_does_not_have_is_a_configuration_error_at_check(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    config = SandboxConfig("command", template="sh -c {command} {image}", pass_env=("DOCKER_HOST",))
    with pytest.raises(SandboxConfigError, match="DOCKER_HOST to pass to the runtime, but not set"):
        check_backend(config)
    with pytest.raises(SandboxConfigError, match="'DOCKER HOST' is not the name of an environment variable"):
        make_sandbox(SandboxConfig("command", template=TEMPLATE, pass_env=("DOCKER HOST",)))


def test_checking_a_working_command_backend_passes():
    check_backend(SandboxConfig("command", template=TEMPLATE))


def test_a_readonly_path_the_sandbox_would_mount_over_is_refused():
    with pytest.raises(SandboxConfigError, match="'/tmp/venv' lies under /tmp"):
        BwrapSandbox(readonly_paths=(*SYSTEM_PATHS, "/tmp/venv"))


def test_a_workdir_the_sandboxs_user_cannot_reach_is_the_sandboxs_error_not_a_failing_command(tmp_path):
    # bwrap says the sandbox is up, then fails to mount the copy and exits 1 as a failing command
    # would: it was read as the candidate's failure. pytest's tmp_path is 0700, closed to nobody.
    if BwrapSandbox().argv(tmp_path, ["true"], QUICK)[0] != "setpriv":
        pytest.skip("the worker is not root here: the sandbox runs as the worker's user, who reaches its own folders")
    folder = tmp_path / "work"
    folder.mkdir()
    result = BwrapSandbox().run(folder, ["true"], QUICK)
    assert (result.status, result.exit_code) == (ERROR, None)
    assert "before the command ran" in result.output and "Permission denied" in result.output


def test_a_runtime_that_fails_before_the_command_is_the_sandboxs_error_not_a_failing_command(workdir):
    result = CommandSandbox("sh -c 'echo no such image >&2; exit 125' runtime {command}").run(workdir, ["true"], QUICK)
    assert (result.status, result.exit_code) == (ERROR, None)
    assert result.output == "the runtime exited with 125 before the command ran: no such image\n"


def test_a_command_that_prints_the_sandboxs_words_and_fails_is_still_a_failure(sandbox, workdir):
    result = sandbox.run(workdir, "echo 'bwrap: Permission denied' >&2; exit 1", QUICK)
    assert (result.status, result.exit_code, result.output) == (FAILED, 1, "bwrap: Permission denied\n")
