"""The {{env_id}} environment: each episode asks one bundled question and scores one answer."""

import json
from pathlib import Path
from typing import Any
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata, State

try:
    from ..models import {{action_class}}, {{observation_class}}
except ImportError:
    from models import {{action_class}}, {{observation_class}}

from . import gatekept_verifier
from .gatekept_reward import score

ENV_ID = {{env_id_literal}}
DESCRIPTION = {{description}}
VERSION = {{version}}
SYSTEM_PROMPT = {{system_prompt}}
ANSWER_FORMAT = {{answer_format}}
COMPLETION_FORMAT = {{completion_format}}
VERIFIER = getattr(gatekept_verifier, {{verifier_name}})
DATA_FILE = Path(__file__).with_name("data.jsonl")
README_FILE = Path(__file__).resolve().parent.parent / "README.md"


def load_rows() -> list[dict[str, Any]]:
    with DATA_FILE.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


ROWS = load_rows()


class {{environment_class}}(Environment[{{action_class}}, {{observation_class}}, State]):
    # Sessions share only the read-only rows; cursor and episode live on the instance.
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._cursor = 0
        self._row: dict[str, Any] | None = None
        self._row_index: int | None = None
        self._done = False
        self._state = State(episode_id=str(uuid4()), step_count=0)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        **kwargs: Any,
    ) -> {{observation_class}}:
        """Start an episode on row `index` (a keyword), else row `seed % len(ROWS)`, else the next row in order."""
        index = kwargs.get("index")
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(ROWS):
                raise ValueError(f"index must be an integer in [0, {len(ROWS)}), got {index!r}")
            chosen = index
        elif seed is not None:
            chosen = int(seed) % len(ROWS)
        else:
            chosen = self._cursor % len(ROWS)
            self._cursor += 1
        self._row_index = chosen
        self._row = ROWS[chosen]
        self._done = False
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0, row_index=chosen)
        return self._observation(reward=None)

    def step(
        self,
        action: {{action_class}},
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> {{observation_class}}:
        """Score the answer. An `index` keyword opens the episode first, which HTTP
        /step needs: every HTTP request gets a fresh environment that never saw a reset."""
        index = kwargs.get("index")
        if index is not None and (self._row is None or self._done):
            self.reset(index=index)
        elif index is not None and index != self._row_index:
            raise ValueError(f"this episode asks row {self._row_index}, not row {index}")
        if self._row is None:
            raise RuntimeError("no episode: call reset() first, or pass index to step()")
        if self._done:
            raise RuntimeError("this episode is over: call reset() for the next question")
        # One answer per episode even when the verifier fails, so a client
        # cannot retry until some reply stops raising.
        self._done = True
        self._state.step_count += 1
        # A verifier error propagates: a broken reward must be seen, not trained on as 0.
        reward = score(
            VERIFIER,
            COMPLETION_FORMAT,
            text=action.answer,
            answer=self._row["answer"],
            question=self._row["question"],
            info=self._row.get("info"),
        )
        return self._observation(reward=reward)

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        readme = README_FILE.read_text(encoding="utf-8") if README_FILE.is_file() else None
        return EnvironmentMetadata(name=ENV_ID, description=DESCRIPTION, version=VERSION, readme_content=readme)

    def _observation(self, reward: float | None) -> {{observation_class}}:
        assert self._row is not None
        return {{observation_class}}(
            question=self._row["question"],
            system_prompt=SYSTEM_PROMPT,
            answer_format=ANSWER_FORMAT,
            row_index=self._row_index,
            done=self._done,
            reward=reward,
        )
