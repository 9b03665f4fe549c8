"""Real backend classes for the worker tests, loaded by a profile's `backend = "module:Class"`."""

import json

from grading.backends import Backend, Reply, per_conversation

CLAMP_CHECK = "python -c 'from calc.ops import clamp; print(clamp(-1, 0, 10), clamp(5, 0, 10))'"


class CodeCalling(Backend):
    """A model that runs `tests/test_ops.py` on every passing candidate but the last its schema
    offers the code tools for, runs one check on them all and the reference fix (run_all), reads
    the first one's `calc/ops.py`, then submits them all as one tie.
    Without the code tools in its schema it submits at once. Its labels come from the schema."""

    model_id = "code-calling"

    def generate(self, conversations, schemas, sampling):
        schemas = per_conversation(schemas, len(conversations))
        return [Reply(self._next(conversation, schema), prompt_tokens=10, completion_tokens=10)
                for conversation, schema in zip(conversations, schemas, strict=True)]

    @staticmethod
    def _next(conversation, schema) -> str:
        branches = {branch["properties"]["tool"]["const"]: branch for branch in schema.get("anyOf", [schema])}
        passing = list(branches["submit_ranking"]["properties"]["rationales"]["properties"])
        turn = sum(message["role"] == "assistant" for message in conversation)
        actions = []
        if "run_tests" in branches:
            actions = [{"tool": "run_tests", "label": label, "tests": ["tests/test_ops.py"]}
                       for label in passing[:-1]]
            actions.append({"tool": "run_all", "command": CLAMP_CHECK})
            actions.append({"tool": "view_file", "label": passing[0], "path": "calc/ops.py", "start": 1, "end": 40})
        if turn < len(actions):
            return json.dumps(actions[turn])
        return json.dumps({"tool": "submit_ranking", "ranking": [passing],
                           "rationales": {label: "tied" for label in passing},
                           "flags": {label: [] for label in passing}})
