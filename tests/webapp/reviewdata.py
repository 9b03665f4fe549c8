"""Data for the review-page tests: small groups imported through the real import
service, and many bare groups inserted directly for pagination."""

import json

from tests.factories import rollout, write_jsonl
from webapp.batches.services import batch_import
from webapp.models import Batch, Group


def file_patch(path: str, added: list[str], removed: list[str] = (), start: int = 1, new: bool = False) -> str:
    """A one-hunk git diff of `path`."""
    old_len = len(removed)
    head = (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n" if new
            else f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n")
    hunk = f"@@ -{0 if new else start},{old_len} +{start},{len(added)} @@\n"
    return head + hunk + "".join(f"-{line}\n" for line in removed) + "".join(f"+{line}\n" for line in added)


CLEAN = file_patch("pkg/mod.py", ["    return x + 1"], ["    return x"], start=2)
CLEAN_WS = file_patch("pkg/mod.py", ["    return x  +  1"], ["    return x"], start=2)
DEBUG = file_patch("pkg/mod.py", ["    print('debug', x)", "    return x + 1"], ["    return x"], start=2)
STRAY = CLEAN + file_patch("reproduce_bug.py", ["import pkg", "print(pkg.f(1))"], new=True)
WRONG = file_patch("pkg/other.py", ["    return 0"], ["    return 1"], start=5)

MESSAGES = [
    {"role": "system", "content": "You are a careful engineer."},
    {"role": "user", "content": "Fix f so that it adds one."},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat pkg/mod.py"}'}}
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "def f(x):\n    return x\n"},
    {"role": "assistant", "content": "Done: f now returns x + 1."},
]


def records(group_id: str = "task-1", statement: str = "Fix **f** so it adds one.\n\n[docs](https://example.org/d)",
            reference: str | None = CLEAN) -> list[dict]:
    """A mixed group: t1 clean, t2 same as t1, t3 same up to whitespace, t4 debug
    print, t5 stray script, t6 failing with another file."""
    patches = [("t1", 1.0, CLEAN), ("t2", 1.0, CLEAN), ("t3", 1.0, CLEAN_WS), ("t4", 1.0, DEBUG),
               ("t5", 1.0, STRAY), ("t6", 0.0, WRONG)]
    out = []
    for tid, reward, patch in patches:
        out.append(rollout(group_id, tid, reward, patch=patch, messages=MESSAGES,
                           metrics={"num_turns": 3, "output_tokens": 1200 + len(out)},
                           tests={"passed": ["tests/test_mod.py::test_f"] if reward else [],
                                  "failed": [] if reward else ["tests/test_mod.py::test_f"]}))
    out[0]["task"] = {"id": group_id, "statement": statement, "repo": "o/r", "base_commit": "a" * 40,
                      "reference_patch": reference}
    return out


def import_batch(tmp_path, recs, name="review") -> Batch:
    path = write_jsonl(tmp_path / "batch.jsonl", recs)
    return batch_import(paths=[path], batch_name=name).batch


def bare_groups(batch: Batch, n: int, prefix: str = "g") -> list[Group]:
    """`n` groups without trajectories, with spread-out pass rates and labels."""
    labels = [Group.Label.MIXED, Group.Label.ALL_PASS, Group.Label.ALL_FAIL, Group.Label.MIXED]
    groups = Group.objects.bulk_create(
        Group(batch=batch, group_id=f"{prefix}{i:05d}", task_id=f"{prefix}{i:05d}",
              statement=f"statement {i} {'needle' if i % 10 == 3 else ''}",
              label=labels[i % 4], n_trajectories=4, n_passed=i % 5, pass_rate=(i % 5) / 4)
        for i in range(n)
    )
    Batch.objects.filter(pk=batch.pk).update(n_groups=Group.objects.filter(batch=batch).count())
    batch.refresh_from_db()
    return groups


# Markup and script that must never run or become markup, and a direction override.
PAYLOAD = (
    '<script>window.__pwned="script"</script><img src=x onerror="window.__pwned=\'img\'">'
    '<a href="javascript:window.__pwned=\'link\'">click</a>[md](javascript:window.__pwned=\'md\')'
    '<div hx-get="/evil" hx-trigger="load">hx</div><b hx-on:click="window.__pwned=\'hxon\'" '
    'hx-on::load="window.__pwned=\'hxload\'">on</b></textarea><script>window.__pwned="ta"</script>'
    '{{ 7|add:7 }}{% debug %}"><svg onload="window.__pwned=\'svg\'">\' onmouseover="window.__pwned=\'attr\'" '
    '<iframe src="javascript:window.__pwned=\'iframe\'"></iframe><style>body{display:none}</style>'
    '<meta http-equiv="refresh" content="0;url=/evil"><base href="/evil/">\u202egnp.exe'
)
SHORT_PAYLOAD = '<img src=x onerror="window.__pwned=1">"\'\u202e{{x}}'
PAYLOAD_PATH = "src/x<img src=y onerror=window.__pwned='path'>\u202e.py"


def hostile_records(group_id: str = "evil" + SHORT_PAYLOAD) -> list[dict]:
    """A mixed group with PAYLOAD in every field a page shows."""
    patch = (file_patch(PAYLOAD_PATH, [PAYLOAD, "print(1)  # " + PAYLOAD], ["old " + SHORT_PAYLOAD], start=3)
             + file_patch("pkg/mod.py", ["    return x + 1"], ["    return x"], start=2))
    messages = [
        {"role": "system", "content": PAYLOAD},
        {"role": "user" + SHORT_PAYLOAD, "content": [{"type": "text", "text": PAYLOAD}]},
        {"role": "assistant", "content": PAYLOAD, "name": SHORT_PAYLOAD, "tool_calls": [
            {"id": "c" + SHORT_PAYLOAD, "type": "function",
             "function": {"name": "bash" + SHORT_PAYLOAD, "arguments": json.dumps({"cmd": PAYLOAD})}},
            {"id": "c2", "type": "function", "function": {"name": "raw", "arguments": PAYLOAD}},
        ]},
        {"role": "tool", "tool_call_id": "c" + SHORT_PAYLOAD, "content": PAYLOAD * 200},
    ]
    out = []
    for i, reward in enumerate([1.0, 1.0, 0.0], start=1):
        out.append(rollout(
            group_id, f"t{i}" + SHORT_PAYLOAD, reward, patch=patch if i != 2 else CLEAN, messages=messages,
            metrics={PAYLOAD: PAYLOAD, "note": SHORT_PAYLOAD, "num_turns": 4, "output_tokens": 5},
            tests={"passed": [PAYLOAD], "failed": [SHORT_PAYLOAD]},
        ))
    out[0]["task"] = {"id": "task" + SHORT_PAYLOAD, "statement": PAYLOAD + "\n\n# Title " + PAYLOAD,
                      "repo": "o/r" + SHORT_PAYLOAD, "base_commit": SHORT_PAYLOAD, "reference_patch": patch}
    return out
