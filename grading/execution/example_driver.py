"""The examples' driver: runs the issue's examples on one copy of the code, each in a process of
its own, and records what each printed and how it ended (docs/execution.md, "Probes").

It runs inside the sandbox, in the task's own interpreter: nothing on the host imports it but
to check it (`examples.seat_examples` copies its text into a run's copy, in a folder of a
random name). So: the standard library only, and the syntax of Python 3.6.

    python <folder>/<folder>.py SECONDS [TRACER]

It reads `examples.json` beside itself, `[{"source": text, "session": bool}]`, runs each in the
copy's folder with the same interpreter, a statement at a time as an interactive session does
(an expression's value is printed), within SECONDS; an exception prints its last line (the
traceback's lines name files and line numbers, which differ between two fixes that behave
alike) and ends the example, unless it is a `>>>` session, where each statement stands alone.
TRACER: a tracer's folder in the copy (tracer.py), started in each example's process.

It writes `examples.jsonl` beside itself, one JSON object a line, in order: `{"index": i,
"status": "exit" or "timeout", "exit_code": n or null, "output": text, "cut": bytes left out}`,
the output (stdout and stderr together) at most MAX_OUTPUT bytes, with the copy's folder, this
one's and the tracer's written as `<copy>`, `<driver>`, `<tracer>` and memory addresses
blanked: two copies that behave alike print alike.
"""

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time

_FOLDER = os.path.dirname(os.path.realpath(__file__))
_RESULTS = os.path.join(_FOLDER, "examples.jsonl")
MAX_OUTPUT = 8 * 1024
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")

# What each example's process runs: argv[1] the source, argv[2] "1" for a session, argv[3] the
# tracer's folder or "".
_CHILD = r"""
import ast, os, sys, traceback
source, session, tracer = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
del sys.argv[1:]
if tracer:
    sys.path.insert(0, tracer)
    __import__(os.path.basename(tracer)).start()
    sys.path.remove(tracer)
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
failed = False
for statement in ast.parse(source).body:
    try:
        exec(compile(ast.Interactive(body=[statement]), "<example>", "single"), namespace)
    except SystemExit:
        raise
    except BaseException as error:
        failed = True
        sys.stdout.write(traceback.format_exception_only(type(error), error)[-1])
        if not session:
            break
    sys.stdout.flush()
sys.exit(1 if failed else 0)
"""


def main():
    seconds = float(sys.argv[1])
    tracer = os.path.join(os.getcwd(), sys.argv[2]) if len(sys.argv) > 2 else ""
    with open(os.path.join(_FOLDER, "examples.json")) as examples:
        examples = json.load(examples)
    for index, example in enumerate(examples):
        status, exit_code, output, cut = _run([sys.executable, "-u", "-c", _CHILD, example["source"],
                                               "1" if example["session"] else "0", tracer], seconds)
        text = output.decode("utf-8", "replace")
        for path, name in ((_FOLDER, "<driver>"), (tracer, "<tracer>"), (os.getcwd(), "<copy>")):
            if path:
                text = text.replace(path, name)
        _write(index=index, status=status, exit_code=exit_code, output=_ADDRESS.sub("0x?", text), cut=cut)


def _write(**record):
    with open(_RESULTS, "a") as results:
        results.write(json.dumps(record, sort_keys=True) + "\n")


def _run(argv, seconds):
    """(status, exit code or None, the output's first MAX_OUTPUT bytes, the bytes left out)."""
    # A fixed hash seed: a set printed in the same order by every copy.
    environment = dict(os.environ, PYTHONHASHSEED="0", PYTHONIOENCODING="utf-8")
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=environment, start_new_session=True)
    deadline = time.monotonic() + seconds
    kept, total = b"", 0
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(deadline - time.monotonic()):
                continue
            chunk = os.read(child.stdout.fileno(), 65536)
            if not chunk:
                break
            # Read on past the limit, keeping nothing: a child blocked on a full pipe would
            # read as a timeout.
            kept += chunk[:MAX_OUTPUT - len(kept)]
            total += len(chunk)
    try:
        exit_code = child.wait(max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        exit_code = None
    try:
        os.killpg(child.pid, signal.SIGKILL)  # what the example started, with it
    except OSError:
        pass
    child.wait()
    child.stdout.close()
    return ("exit" if exit_code is not None else "timeout"), exit_code, kept, total - len(kept)


if __name__ == "__main__":
    main()
