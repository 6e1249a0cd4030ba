"""Client for a running {{env_id}} server (one WebSocket session per client)."""

from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.types import State

from .models import {{action_class}}, {{observation_class}}


class {{client_class}}(EnvClient[{{action_class}}, {{observation_class}}, State]):
    """`reset(index=i)` or `reset(seed=s)` picks a row; `step({{action_class}}(answer=reply))` scores it."""

    def _step_payload(self, action: {{action_class}}) -> dict[str, Any]:
        return {"answer": action.answer}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[{{observation_class}}]:
        fields = payload.get("observation", {})
        observation = {{observation_class}}(
            question=fields.get("question", ""),
            system_prompt=fields.get("system_prompt", ""),
            answer_format=fields.get("answer_format", {{answer_format}}),
            row_index=fields.get("row_index"),
            done=payload.get("done", False),
            reward=payload.get("reward"),
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)
