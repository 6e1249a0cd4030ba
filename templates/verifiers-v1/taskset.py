"""The {{env_id}} taskset: bundled rows, one reply each, scored by the gated verifier.

Written by gatekept for verifiers 0.4 (`verifiers.v1`). The reward hands the
assistant's final reply to gatekept_verifier.py, the file the gate audited,
through gatekept_reward.py, the convention it was audited under.
"""

import json
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.types import content_text

from . import gatekept_verifier
from .gatekept_reward import score_async

ENV_ID = {{env_id_literal}}
SYSTEM_PROMPT = {{system_prompt}}
ANSWER_FORMAT = {{answer_format}}
COMPLETION_FORMAT = {{completion_format}}
VERIFIER_NAME = {{verifier_name}}
VERIFIER = getattr(gatekept_verifier, VERIFIER_NAME)
DATA_FILE = Path(__file__).with_name("data.jsonl")


def load_rows() -> list[dict[str, Any]]:
    """The bundled rows, read from the package: nothing is downloaded."""
    with DATA_FILE.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


class {{data_class}}(vf.TaskData):
    answer: str
    """The gold answer the verifier compares against."""
    info: dict[str, Any] = {}
    """The row's info, handed to the verifier as `info`."""


def final_reply(trace: vf.Trace) -> str:
    """The last assistant message's text as the model wrote it (not stripped:
    the gate audited the verifier on exact replies)."""
    replies = trace.assistant_messages
    if replies:
        return content_text(replies[-1].content)
    return trace.last_reply


class {{task_class}}(vf.Task[{{data_class}}]):
    @vf.stop
    async def single_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def gated_reward(self, task: {{data_class}}, trace: vf.Trace) -> float:
        # The verifier gets the call the gate audited (plain-dict messages and a
        # fixed keyword pool), rebuilt from the reply, the question, the gold and
        # the info; an error propagates, as verifiers does for any reward.
        return await score_async(
            VERIFIER,
            COMPLETION_FORMAT,
            text=final_reply(trace),
            answer=task.answer,
            question=task.prompt_text,
            info=task.info,
        )

    # Traces report the reward under the verifier's own name.
    gated_reward.__name__ = VERIFIER_NAME


class {{config_class}}(vf.TasksetConfig):
    pass


class {{taskset_class}}(vf.Taskset[{{task_class}}, {{config_class}}]):
    def load(self) -> list[{{task_class}}]:
        return [
            {{task_class}}(
                {{data_class}}(
                    id=f"{ENV_ID}-{index}",
                    prompt=row["question"],
                    system_prompt=SYSTEM_PROMPT,
                    answer=row["answer"],
                    info=row.get("info") or {},
                ),
                self.config.task,
            )
            for index, row in enumerate(load_rows())
        ]
