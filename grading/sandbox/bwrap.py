"""The `bwrap` backend: bubblewrap (Debian's `bubblewrap` package) on the worker's host.

Inside: the workdir, read-write, at /work; the system folders (`readonly_paths`) read-only;
a private /dev, /proc and /tmp; no network (a namespace with no interface but loopback);
nothing else writable: the root and /dev are read-only, and the two memory-backed folders
left writable, /tmp and /dev/shm, are sized and counted against the memory limit;
no environment but PATH, HOME, TMPDIR and LANG; no capabilities. It runs as an
unprivileged user in a user namespace of its own: the worker's user, or `run_as` when
the worker is root, since the kernel counts no process limit against root. Nothing
outlives the run: the sandbox is a pid namespace, ended with its first process.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grading.sandbox.errors import SandboxConfigError
from grading.sandbox.limits import ERROR, FAILED, PASSED, Limits, RunResult
from grading.sandbox.started import announced, reached
from grading.sandbox.supervise import pid_namespace_memory, supervise

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
NOBODY = 65534
WORKDIR = "/work"
PATH = "/usr/local/bin:/usr/bin:/bin"
HIDDEN_BY_MOUNTS = ("/tmp", WORKDIR, "/dev", "/proc")
# The run's writable memory-backed filesystems: what is stored there is memory it holds.
MEMORY_FILESYSTEMS = ("/tmp", "/dev/shm")


@dataclass(frozen=True)
class BwrapSandbox:
    """`executable` is bwrap's name or path; `run_as` the uid (and gid) the run takes when
    the worker is root; `readonly_paths` the host folders the run sees, read-only (add a
    virtual environment's folder here when the tests need one)."""

    executable: str = "bwrap"
    run_as: int = NOBODY
    readonly_paths: tuple[str, ...] = SYSTEM_PATHS

    def __post_init__(self) -> None:
        # The workdir and the private /tmp, /dev and /proc are mounted after the read-only
        # binds and would hide a folder under them without a word.
        for path in self.readonly_paths:
            if any(Path(path) == Path(top) or Path(path).is_relative_to(top) for top in HIDDEN_BY_MOUNTS):
                raise SandboxConfigError(f"bwrap: readonly path {path!r} lies under {', '.join(HIDDEN_BY_MOUNTS)}, "
                                         "which the sandbox mounts over: put it elsewhere")

    def check(self) -> None:
        """Raise SandboxConfigError unless this host can run a sandbox: bwrap is installed
        and may create its namespaces (a trial run of `true`)."""
        if shutil.which(self.executable) is None:
            raise SandboxConfigError(f"bwrap: {self.executable!r} is not installed "
                                     "(scripts/sandbox.sh installs Debian's bubblewrap)")
        with tempfile.TemporaryDirectory() as parent:
            os.chmod(parent, 0o755)
            workdir = Path(parent, "work")
            workdir.mkdir()
            trial = self.run(workdir, ["true"], Limits(wall_seconds=60))
        if trial.status != PASSED:
            raise SandboxConfigError(f"bwrap cannot start a sandbox here ({trial.status}): "
                                     f"{trial.output.strip()}\n{trial.command}")

    def run(self, workdir: Path, command: list[str] | str, limits: Limits) -> RunResult:
        """Run `command` (an argument list, or a line for `sh -c`) in /work, the sandbox's
        view of `workdir`. When the worker is root, `workdir` is handed to `run_as` first,
        and its parent folders must let `run_as` through."""
        if os.geteuid() == 0:
            _chown_tree(workdir, self.run_as)
        info_read, info_write = os.pipe()
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                self.argv(workdir, command, limits, info_fd=info_write),
                pass_fds=(info_write,), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, env={"PATH": PATH}, start_new_session=True)
        finally:
            os.close(info_write)
        with os.fdopen(info_read, "rb") as info_file:
            info = info_file.read()  # bwrap closes it once the sandbox is up, or on failure
        shown = shlex.join(self.argv(workdir, command, limits))
        if not info:
            exit_code = process.wait()
            output = process.stdout.read().decode(errors="replace")
            process.stdout.close()
            return RunResult(ERROR, None, time.monotonic() - started,
                             f"bwrap exited with {exit_code} before the command ran: {output}",
                             shown)
        namespaces = json.loads(info)
        memory = pid_namespace_memory(namespaces["pid-namespace"], init_pid=namespaces["child-pid"],
                                      filesystems=MEMORY_FILESYSTEMS)
        status, exit_code, output = supervise(process, limits, started=started,
                                              memory_in_use=memory)
        started_command, output = reached(output)
        if not started_command and status in (PASSED, FAILED):
            # bwrap says the sandbox is up before it mounts the workdir, and a mount that
            # fails ends it with exit code 1, as a failing command would.
            return RunResult(ERROR, None, time.monotonic() - started,
                             f"bwrap exited with {exit_code} before the command ran: {output}", shown)
        return RunResult(status, exit_code, time.monotonic() - started, output, shown)

    def argv(self, workdir: Path, command: list[str] | str, limits: Limits, *,
             info_fd: int | None = None) -> list[str]:
        """The host command line of one run (`info_fd`: where bwrap writes its namespaces)."""
        drop_root = ["setpriv", f"--reuid={self.run_as}", f"--regid={self.run_as}",
                     "--clear-groups", "--"] if os.geteuid() == 0 else []
        readonly = [arg for path in self.readonly_paths for arg in ("--ro-bind-try", path, path)]
        info = ["--info-fd", str(info_fd)] if info_fd is not None else []
        # prlimit runs inside: the limits bind the command, not bwrap's own set-up.
        process_limits = ["prlimit", f"--nproc={limits.max_processes}",
                          f"--fsize={limits.file_bytes}", "--core=0", "--"]
        argv = command if isinstance(command, list) else ["sh", "-c", command]
        return [
            *drop_root, self.executable,
            "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--clearenv", "--setenv", "PATH", PATH, "--setenv", "HOME", WORKDIR,
            "--setenv", "TMPDIR", "/tmp", "--setenv", "LANG", "C.UTF-8",
            *readonly, "--dev", "/dev", "--proc", "/proc",
            # bwrap's own tmpfs mounts (the root, /dev) take half the host's memory each
            # when writable: only /tmp and /dev/shm are, sized, and counted as memory.
            "--size", str(limits.tmp_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
            "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
            "--bind", str(workdir), WORKDIR, "--chdir", WORKDIR, "--remount-ro", "/", *info,
            "--", *process_limits, *announced(argv),
        ]


def _chown_tree(tree: Path, uid: int) -> None:
    """Give every file of `tree` to `uid`, without following symlinks out of it."""
    os.lchown(tree, uid, uid)
    for folder, subfolders, files in os.walk(tree):
        for name in subfolders + files:
            os.lchown(os.path.join(folder, name), uid, uid)
