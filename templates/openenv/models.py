"""Wire models of the {{env_id}} environment."""

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class {{action_class}}(Action):
    answer: str = Field(..., description="The model's whole reply; the gated verifier scores it.")


class {{observation_class}}(Observation):
    # Never the gold answer: the agent reads this before it answers.
    question: str = Field(default="", description="The question of this episode.")
    system_prompt: str = Field(default="", description="Instructions to give the model, including the answer format.")
    answer_format: str = Field(default={{answer_format}}, description="How the answer is expected to be written.")
    row_index: int | None = Field(default=None, description="Which bundled row this episode asks.")
