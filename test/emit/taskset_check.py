"""Load emitted verifiers 0.4 packages by id, the way vf-eval does, and
score replies through Task.score on a constructed trace.

    python taskset_check.py ENV_ID CASES_JSON [ENV_ID CASES_JSON ...]

CASES_JSON is a list of {"row": i, "text": reply}. Prints one line
`RESULT <json>` per package, in the order given: one process (one import of
verifiers, seconds of CPU) checks them all.
"""

import asyncio
import hashlib
import importlib
import json
import sys
from pathlib import Path

import verifiers
import verifiers.v1 as vf
from verifiers.v1.utils.loaders import taskset_class


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def score(task, text):
    trace = vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data),
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        nodes=[vf.MessageNode(message=vf.AssistantMessage(content=text), sampled=True)],
    )
    try:
        await task.score(trace)
    except Exception as error:
        cause = error.__cause__ or error
        return {"error": "%s: %s" % (type(cause).__name__, cause)}
    return {
        "reward": trace.reward,
        "rewards": {name: [reward.score, reward.weight] for name, reward in trace.rewards.items()},
    }


def check(env_id, cases):
    config = vf.taskset_config_type(env_id)(id=env_id)
    taskset = vf.load_taskset(config)
    tasks = list(taskset)
    module = importlib.import_module(type(taskset).__module__.rsplit(".", 1)[0])

    async def main():
        return [await score(tasks[case["row"]], case["text"]) for case in cases]

    installed = Path(module.__file__).parent
    return {
        "version": verifiers.__version__,
        "taskset": type(taskset).__name__,
        "class": taskset_class(env_id).__name__,
        "all": list(module.__all__),
        "installed": str(installed),
        "tasks": [
            {
                "id": task.data.id,
                "prompt": task.data.prompt,
                "system_prompt": task.data.system_prompt,
                "answer": task.data.answer,
                "info": task.data.info,
                "gold": [task.data.gold_reply, task.data.gold_reward],
            }
            for task in tasks
        ],
        "scores": asyncio.run(main()),
        "files": [digest(installed / "gatekept_verifier.py"), digest(installed / "gatekept_reward.py")],
    }


args = sys.argv[1:]
for index in range(0, len(args), 2):
    print("RESULT " + json.dumps(check(args[index], json.loads(args[index + 1]))))
