"""The {{env_id}} environment: bundled rows, one reply each, scored by the gated verifier."""

import json
from pathlib import Path
from typing import Any

import verifiers as vf
from datasets import Dataset

from . import gatekept_verifier
from .gatekept_reward import score_async

ENV_ID = {{env_id_literal}}
SYSTEM_PROMPT = {{system_prompt}}
ANSWER_FORMAT = {{answer_format}}
COMPLETION_FORMAT = {{completion_format}}
VERIFIER_NAME = {{verifier_name}}
VERIFIER = getattr(gatekept_verifier, VERIFIER_NAME)
DATA_FILE = Path(__file__).with_name("data.jsonl")
# The dataset column that carries each row's info, as JSON text. verifiers
# reads keys of its own `info` column (`task`, `tool_defs`, ...) and Arrow
# would merge differently shaped objects, so the gate's info travels apart.
INFO_COLUMN = "gatekept_info"

# Replacing any of these would score something other than what was audited.
AUDITED_ARGUMENTS = ("dataset", "eval_dataset", "rubric")


def load_rows() -> list[dict[str, Any]]:
    with DATA_FILE.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def build_dataset() -> Dataset:
    """In memory from the bundled file: nothing is downloaded."""
    return Dataset.from_list(
        [
            {
                "question": row["question"],
                "answer": row["answer"],
                INFO_COLUMN: json.dumps(row.get("info") or {}, ensure_ascii=False),
            }
            for row in load_rows()
        ]
    )


def default_parser() -> vf.Parser:
    # Only parse_answer (what vf-eval shows as the parsed answer) uses it; the
    # verifier does its own extraction.
    if ANSWER_FORMAT == "xml":
        return vf.XMLParser(["answer"], answer_field="answer")
    return vf.Parser()


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_field(part, "text") for part in content if _field(part, "type") == "text"]
        return "".join(part for part in parts if isinstance(part, str))
    return ""


def _last_text(messages: Any, role: str) -> str:
    if isinstance(messages, str):
        return messages
    for message in reversed(messages or []):
        if _field(message, "role") == role:
            return _text(_field(message, "content"))
    return ""


async def gated_reward(prompt: Any, completion: Any, answer: Any = "", question: Any = None, gatekept_info: Any = None) -> float:
    # verifiers hands over its own message objects, the whole dataset row and
    # the rollout state; the gate audited plain-dict messages and a fixed pool,
    # so the call is rebuilt from the reply text, the question, the gold and the info.
    return await score_async(
        VERIFIER,
        COMPLETION_FORMAT,
        text=_last_text(completion, "assistant"),
        answer=answer if isinstance(answer, str) else str(answer),
        question=question if isinstance(question, str) else _last_text(prompt, "user"),
        info=json.loads(gatekept_info) if isinstance(gatekept_info, str) else {},
    )


# Rubric reports each reward under its function's name.
gated_reward.__name__ = VERIFIER_NAME
gated_reward.__qualname__ = VERIFIER_NAME


def load_environment(**kwargs: Any) -> vf.Environment:
    """A SingleTurnEnv over the bundled rows; keyword arguments go to vf.SingleTurnEnv."""
    replaced = sorted(set(kwargs) & set(AUDITED_ARGUMENTS))
    if replaced:
        raise ValueError(f"{ENV_ID}: {', '.join(replaced)} cannot be replaced; the audit covers the bundled ones")
    parser = kwargs.pop("parser", None) or default_parser()
    options: dict[str, Any] = {"system_prompt": SYSTEM_PROMPT, **kwargs}
    return vf.SingleTurnEnv(
        dataset=build_dataset(),
        eval_dataset=build_dataset(),
        parser=parser,
        rubric=vf.Rubric(funcs=[gated_reward], weights=[1.0], parser=parser),
        **options,
    )
