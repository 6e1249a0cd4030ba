"""Load emitted classic verifiers (0.3.1) packages, roll each reply out
through the environment with a client that answers from a script instead of a
model, and score it with the rubric's own score_rollout (one rollout) and
score_group (a training group).

    python classic_check.py MODULE ENV_ID CASES_JSON [MODULE ENV_ID CASES_JSON ...]

Prints one line `RESULT <json>` per package, in the order given: one process
checks them all.
"""

import asyncio
import hashlib
import importlib
import json
import logging
import sys
from pathlib import Path

import verifiers as vf
from verifiers.clients import Client
from verifiers.scripts.eval import get_env_eval_defaults
from verifiers.types import Response, ResponseMessage

errors = []


class Collect(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.ERROR:
            errors.append(record.getMessage())


# verifiers' logger does not propagate to the root.
logging.getLogger("verifiers").addHandler(Collect())


class Scripted(Client):
    def __init__(self, text):
        super().__init__(None)
        self.text = text
        self.prompts = []

    def setup_client(self, config):
        return None

    async def to_native_tool(self, tool):
        return tool

    async def to_native_prompt(self, messages):
        return messages, {}

    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
        self.prompts.append([[m["role"], m["content"]] for m in prompt])
        return self.text

    async def raise_from_native_response(self, response):
        return None

    async def from_native_response(self, response):
        message = ResponseMessage(content=response, finish_reason="stop", is_truncated=False)
        return Response(id="scripted", created=0, model="scripted", message=message)

    async def close(self):
        return None


def check(module_name, env_id, cases):
    # The errors the library logged while this package scored.
    errors.clear()
    module = importlib.import_module(module_name)
    env = module.load_environment()
    dataset = env.get_eval_dataset()
    try:
        module.load_environment(rubric=vf.Rubric())
        refused = None
    except ValueError as error:
        refused = str(error)

    async def rollout(case):
        client = Scripted(case["text"])
        state = await env.rollout(dataset[case["row"]], client, "scripted", {})
        return state, client

    async def main():
        scores = []
        for case in cases:
            state, client = await rollout(case)
            await env.rubric.score_rollout(state)
            scores.append({
                "reward": state["reward"],
                "metrics": state["metrics"],
                "message_type": type(state["completion"][-1]).__name__,
                "prompt": client.prompts[0],
            })
        group = [(await rollout(case))[0] for case in cases]
        await env.rubric.score_group(group)
        return scores, [state["reward"] for state in group]

    scores, group = asyncio.run(main())
    installed = Path(module.__file__).parent
    return {
        "version": vf.__version__,
        "env": type(env).__name__,
        "loaded": type(vf.load_environment(env_id)).__name__,
        "rows": [
            {"question": row["question"], "answer": row["answer"], "info": json.loads(row["gatekept_info"]), "prompt": row["prompt"]}
            for row in dataset
        ],
        "train_rows": len(env.get_dataset()),
        "eval_defaults": get_env_eval_defaults(env_id),
        "refused": refused,
        "scores": scores,
        "group": group,
        "errors": list(errors),
        "files": [digest(installed / "gatekept_verifier.py"), digest(installed / "gatekept_reward.py")],
    }


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


args = sys.argv[1:]
for index in range(0, len(args), 3):
    print("RESULT " + json.dumps(check(args[index], args[index + 1], json.loads(args[index + 2]))))
