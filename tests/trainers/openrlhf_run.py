"""OpenRLHF 0.11.2's own reward request code posting samples to a reward server, run in
.venv-verl by tests/trainers/test_openrlhf.py:

    .venv-verl/bin/python tests/trainers/openrlhf_run.py job.json

The job (JSON): `url`, the server's /get_reward address, and `requests`, each a list of
samples `{"query", "prompt", "label"}`. All requests are sent at once, each by one call of
`SingleTurnAgentExecutor._fetch_rewards_via_http` (openrlhf/utils/agent.py: what
OpenRLHF's rollout calls with one sample as each finishes; with one server it POSTs all the
call's samples in one request). Prints JSON: each request's answer, the seconds from the
start until it came, and the start (`started_at`, time.time(), to set against the app's
records).
"""

import asyncio
import json
import sys
import time

from openrlhf.utils.agent import SingleTurnAgentExecutor


async def send(job: dict) -> dict:
    executor = SingleTurnAgentExecutor(job["url"])
    start, started_at = time.monotonic(), time.time()

    async def timed(samples: list[dict]) -> tuple[dict, float]:
        answers = await executor._fetch_rewards_via_http([s["query"] for s in samples], [s["prompt"] for s in samples],
                                                         [s["label"] for s in samples])
        return answers[0], time.monotonic() - start

    results = await asyncio.gather(*(timed(samples) for samples in job["requests"]))
    return {"answers": [answer for answer, _ in results], "seconds": [seconds for _, seconds in results],
            "started_at": started_at}


def main(job_path: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    json.dump(asyncio.run(send(job)), sys.stdout)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:])
