"""The test verdict tests/trainers/test_openrlhf.py gives the reward server (`--test-score
tests.trainers.openrlhf_score:tests_pass`), shaped as OpenRLHF's reward functions are."""


def tests_pass(query: str, prompt: str, label: str) -> dict:
    """The response passes when it holds the label's fix (the prompt never does)."""
    return {"score": 1.0 if label in query.removeprefix(prompt) else 0.0}
