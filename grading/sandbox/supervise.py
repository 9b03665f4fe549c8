"""Watch one started process to its end: its output, its wall clock, its memory."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable

from grading.sandbox.limits import FAILED, KILLED_MEMORY, KILLED_OUTPUT, PASSED, TIMEOUT, Limits

OUTPUT_HEAD_BYTES = 16 * 1024
OUTPUT_TAIL_BYTES = 48 * 1024
POLL_SECONDS = 0.05
READ_BYTES = 64 * 1024


class Output:
    """The head and the tail of a stream, and how many bytes it held."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = OUTPUT_HEAD_BYTES - len(self.head)
        self.head += chunk[:max(room, 0)]
        self.tail += chunk[max(room, 0):]
        del self.tail[:-OUTPUT_TAIL_BYTES]

    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {cut} bytes cut ...]\n".encode() if cut else b""
        return (self.head + middle + self.tail).decode(errors="replace")


def supervise(process: subprocess.Popen, limits: Limits, *, started: float,
              memory_in_use: Callable[[], int] | None) -> tuple[str, int, str]:
    """Read `process`'s stdout (stderr joined to it) until the process ends or passes a
    limit, and kill its process group then. `memory_in_use` gives the resident bytes of
    what it runs (None: the memory is not watched). Returns (status, exit code, output).
    The process must lead its own process group (`start_new_session=True`)."""
    output = Output()
    deadline = started + limits.wall_seconds
    next_memory_check = started
    status = None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        reading = True
        while reading or process.poll() is None:
            if reading and selector.select(timeout=POLL_SECONDS):
                chunk = os.read(process.stdout.fileno(), READ_BYTES)
                output.add(chunk)
                reading = bool(chunk)
            elif not reading:
                _wait_a_while(process)  # its output is closed, yet it runs on
                if process.returncode is not None:
                    break  # ended on its own: its group may be gone, nothing to kill
            now = time.monotonic()
            if output.total > limits.output_bytes:
                status = KILLED_OUTPUT
            elif now >= deadline:
                status = TIMEOUT
            elif memory_in_use is not None and now >= next_memory_check:
                next_memory_check = now + POLL_SECONDS
                if memory_in_use() > limits.memory_bytes:
                    status = KILLED_MEMORY
            if status:
                os.killpg(process.pid, signal.SIGKILL)
                break
    exit_code = process.wait()
    process.stdout.close()
    return status or (PASSED if exit_code == 0 else FAILED), exit_code, output.text()


def _wait_a_while(process: subprocess.Popen) -> None:
    try:
        process.wait(timeout=POLL_SECONDS)
    except subprocess.TimeoutExpired:
        return


def pid_namespace_memory(pid_namespace: int, *, init_pid: int,
                         filesystems: tuple[str, ...] = ()) -> Callable[[], int]:
    """Bytes one pid namespace (its inode) holds in memory: the resident bytes of all its
    processes, summed, and the bytes stored in `filesystems`, its memory-backed (tmpfs)
    mounts, by the paths its processes see them at. Pages that processes share count once
    per process, and a file of `filesystems` that a process maps counts in both: high
    rather than low. `init_pid` is the host pid of the namespace's first process."""
    page = os.sysconf("SC_PAGE_SIZE")

    def memory_in_use() -> int:
        total = 0
        stored = None
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if os.stat(f"/proc/{entry.name}/ns/pid").st_ino != pid_namespace:
                    continue
                with open(f"/proc/{entry.name}/statm") as statm:
                    total += int(statm.read().split()[1]) * page
                # The first process mounts the filesystems and only then starts the others:
                # seen through it, a path may still be the host's own.
                if stored is None and int(entry.name) != init_pid:
                    stored = _stored_bytes(int(entry.name), filesystems)
            # The process ended meanwhile, or it is another user's: not one of ours.
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
        return total + (stored or 0)

    return memory_in_use


def _stored_bytes(pid: int, filesystems: tuple[str, ...]) -> int:
    """The bytes in use in `filesystems`, as process `pid` sees them."""
    total = 0
    for path in filesystems:
        usage = os.statvfs(f"/proc/{pid}/root{path}")
        total += (usage.f_blocks - usage.f_bfree) * usage.f_frsize
    return total
