/**
 * Render a passed environment as an OpenEnv (openenv-core 0.3.x) environment,
 * in the layout `openenv init` scaffolds: a FastAPI app serving one bundled
 * question per episode and scoring the answer with the gated verifier.
 */
import {
  ANSWER_FORMAT_EXAMPLES,
  DATA_FILE_NAME,
  PACKAGE_VERSION,
  REWARD_CALL_FILE_NAME,
  REWARD_CALL_SOURCE,
  VERIFIER_FILE_NAME,
  assertRenderableSpec,
  classPrefix,
  fenced,
  moduleName,
  pyString,
  renderAuditSection,
  renderRows,
  tomlString,
} from '../environment-spec.js';
import type { EnvironmentSpec, PackageFiles } from '../environment-spec.js';

/** The openenv-core releases the emitted code is written and tested against. */
export const OPENENV_REQUIREMENT = 'openenv-core[core]>=0.3.0,<0.4';

interface Names {
  /** The Python import name: the env id's module plus `_env`, so the verifiers package (named by the module) can share a venv. */
  package: string;
  action: string;
  observation: string;
  environment: string;
  client: string;
  environmentModule: string;
}

function namesOf(spec: EnvironmentSpec): Names {
  const prefix = classPrefix(spec.envId);
  const module = moduleName(spec.envId);
  return {
    package: `${module}_env`,
    action: `${prefix}Action`,
    observation: `${prefix}Observation`,
    environment: `${prefix}Environment`,
    client: `${prefix}Env`,
    environmentModule: `${module}_environment`,
  };
}

/** Paths are relative to `openenv/<envId>/`. */
export function renderOpenEnvPackage(spec: EnvironmentSpec): PackageFiles {
  assertRenderableSpec(spec);
  const names = namesOf(spec);
  return new Map<string, string>([
    ['openenv.yaml', renderManifest(spec)],
    ['pyproject.toml', renderPyproject(spec, names)],
    ['README.md', renderReadme(spec, names)],
    ['__init__.py', renderInit(spec, names)],
    ['models.py', renderModels(spec, names)],
    ['client.py', renderClient(spec, names)],
    ['server/__init__.py', renderServerInit(names)],
    [`server/${names.environmentModule}.py`, renderEnvironment(spec, names)],
    ['server/app.py', renderApp(spec, names)],
    [`server/${VERIFIER_FILE_NAME}`, spec.verifierSource],
    [`server/${REWARD_CALL_FILE_NAME}`, REWARD_CALL_SOURCE],
    [`server/${DATA_FILE_NAME}`, renderRows(spec.rows)],
    ['server/requirements.txt', `${OPENENV_REQUIREMENT}\n`],
    ['server/Dockerfile', renderDockerfile()],
  ]);
}

function renderManifest(spec: EnvironmentSpec): string {
  return `spec_version: 1
name: ${spec.envId}
type: space
runtime: fastapi
app: server.app:app
port: 8000
`;
}

function renderPyproject(spec: EnvironmentSpec, names: Names): string {
  const module = names.package;
  return `[build-system]
requires = ["setuptools>=61", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = ${tomlString(`openenv-${spec.envId}`)}
version = ${tomlString(PACKAGE_VERSION)}
description = ${tomlString(spec.description)}
requires-python = ">=3.10"
dependencies = [${tomlString(OPENENV_REQUIREMENT)}]

[project.scripts]
server = "${module}.server.app:main"

[tool.setuptools]
include-package-data = true
packages = ["${module}", "${module}.server"]
package-dir = { "${module}" = ".", "${module}.server" = "server" }

[tool.setuptools.package-data]
"${module}.server" = ["${DATA_FILE_NAME}"]
`;
}

function renderInit(spec: EnvironmentSpec, names: Names): string {
  return `${pyString(spec.description)}

from .client import ${names.client}
from .models import ${names.action}, ${names.observation}

__all__ = ["${names.action}", "${names.observation}", "${names.client}"]
`;
}

function renderModels(spec: EnvironmentSpec, names: Names): string {
  return `"""Wire models of the ${spec.envId} environment."""

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class ${names.action}(Action):
    answer: str = Field(..., description="The model's whole reply; the gated verifier scores it.")


class ${names.observation}(Observation):
    # Never the gold answer: the agent reads this before it answers.
    question: str = Field(default="", description="The question of this episode.")
    system_prompt: str = Field(default="", description="Instructions to give the model, including the answer format.")
    answer_format: str = Field(default=${pyString(spec.answerFormat)}, description="How the answer is expected to be written.")
    row_index: int | None = Field(default=None, description="Which bundled row this episode asks.")
`;
}

function renderClient(spec: EnvironmentSpec, names: Names): string {
  return `"""Client for a running ${spec.envId} server (one WebSocket session per client)."""

from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.types import State

from .models import ${names.action}, ${names.observation}


class ${names.client}(EnvClient[${names.action}, ${names.observation}, State]):
    """\`reset(index=i)\` or \`reset(seed=s)\` picks a row; \`step(${names.action}(answer=reply))\` scores it."""

    def _step_payload(self, action: ${names.action}) -> dict[str, Any]:
        return {"answer": action.answer}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[${names.observation}]:
        fields = payload.get("observation", {})
        observation = ${names.observation}(
            question=fields.get("question", ""),
            system_prompt=fields.get("system_prompt", ""),
            answer_format=fields.get("answer_format", ${pyString(spec.answerFormat)}),
            row_index=fields.get("row_index"),
            done=payload.get("done", False),
            reward=payload.get("reward"),
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)
`;
}

function renderServerInit(names: Names): string {
  return `"""Server side of the environment."""

from .${names.environmentModule} import ${names.environment}

__all__ = ["${names.environment}"]
`;
}

function renderEnvironment(spec: EnvironmentSpec, names: Names): string {
  const verifierModule = VERIFIER_FILE_NAME.replace(/\.py$/, '');
  const rewardModule = REWARD_CALL_FILE_NAME.replace(/\.py$/, '');
  return `"""The ${spec.envId} environment: each episode asks one bundled question and scores one answer."""

import json
from pathlib import Path
from typing import Any
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata, State

try:
    from ..models import ${names.action}, ${names.observation}
except ImportError:
    from models import ${names.action}, ${names.observation}

from . import ${verifierModule}
from .${rewardModule} import score

ENV_ID = ${pyString(spec.envId)}
DESCRIPTION = ${pyString(spec.description)}
VERSION = ${pyString(PACKAGE_VERSION)}
SYSTEM_PROMPT = ${pyString(spec.systemPrompt)}
ANSWER_FORMAT = ${pyString(spec.answerFormat)}
COMPLETION_FORMAT = ${pyString(spec.completionFormat)}
VERIFIER = getattr(${verifierModule}, ${pyString(spec.verifierFunction)})
DATA_FILE = Path(__file__).with_name(${pyString(DATA_FILE_NAME)})
README_FILE = Path(__file__).resolve().parent.parent / "README.md"


def load_rows() -> list[dict[str, Any]]:
    with DATA_FILE.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


ROWS = load_rows()


class ${names.environment}(Environment[${names.action}, ${names.observation}, State]):
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
        index: int | None = None,
        **kwargs: Any,
    ) -> ${names.observation}:
        """Start an episode on row \`index\`, else row \`seed % len(ROWS)\`, else the next row in order."""
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
        action: ${names.action},
        timeout_s: float | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> ${names.observation}:
        """Score the answer. \`index\` opens the episode first, which HTTP /step needs:
        every HTTP request gets a fresh environment that never saw a reset."""
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

    def _observation(self, reward: float | None) -> ${names.observation}:
        assert self._row is not None
        return ${names.observation}(
            question=self._row["question"],
            system_prompt=SYSTEM_PROMPT,
            answer_format=ANSWER_FORMAT,
            row_index=self._row_index,
            done=self._done,
            reward=reward,
        )
`;
}

function renderApp(spec: EnvironmentSpec, names: Names): string {
  return `"""HTTP and WebSocket server for the ${spec.envId} environment.

Run it with \`uv run --project . server\`, \`python -m ${names.package}.server.app\`,
or \`uvicorn server.app:app\` from this directory.
"""

import os

from openenv.core.env_server.http_server import create_app

try:
    from ..models import ${names.action}, ${names.observation}
    from .${names.environmentModule} import ${names.environment}
except ImportError:
    from models import ${names.action}, ${names.observation}
    from server.${names.environmentModule} import ${names.environment}

app = create_app(
    ${names.environment},
    ${names.action},
    ${names.observation},
    env_name=${pyString(spec.envId)},
    max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "64")),
)


def main(host: str = "0.0.0.0", port: int = 8000) -> None:
    import uvicorn

    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=${pyString(`Serve the ${spec.envId} environment.`)})
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    main(host=args.host, port=args.port)
`;
}

function renderDockerfile(): string {
  return `# Built by \`openenv build\` (or \`docker build -f server/Dockerfile .\` from the
# environment directory); BASE_IMAGE can be overridden like any build argument.
ARG BASE_IMAGE=ghcr.io/meta-pytorch/openenv-base:latest
FROM \${BASE_IMAGE} AS builder

WORKDIR /app/env
COPY . /app/env

RUN command -v uv >/dev/null 2>&1 || pip install --no-cache-dir uv

# A committed uv.lock pins the image; without one, uv resolves at build time.
# The cache lives at a fixed path so it does not depend on the build user's home.
ENV UV_CACHE_DIR=/opt/uv-cache
RUN --mount=type=cache,target=/opt/uv-cache \\
    if [ -f uv.lock ]; then uv sync --frozen --no-editable; else uv sync --no-editable; fi

FROM \${BASE_IMAGE}

WORKDIR /app
COPY --from=builder /app/env /app/env
ENV PATH="/app/env/.venv/bin:$PATH"
ENV PYTHONPATH="/app/env"

HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \\
    CMD curl -f http://localhost:8000/health || exit 1

CMD ["sh", "-c", "cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port 8000"]
`;
}

function renderReadme(spec: EnvironmentSpec, names: Names): string {
  const verifierPath = `server/${VERIFIER_FILE_NAME}`;
  const completionArg =
    spec.completionFormat === 'messages'
      ? '`completion` is `[{"role": "assistant", "content": <answer>}]` and `prompt` is `[{"role": "user", "content": <question>}]`, plain dicts'
      : '`completion` is the answer text itself and `prompt` the question text';
  return `---
title: ${spec.envId} environment server
emoji: 🎯
colorFrom: blue
colorTo: gray
sdk: docker
pinned: false
app_port: 8000
base_path: /web
tags:
  - openenv
  - gatekept
---

# ${spec.envId}

${spec.description}

An [OpenEnv](https://github.com/meta-pytorch/OpenEnv) environment (${OPENENV_REQUIREMENT}),
written by gatekept after its reward function passed an adversarial audit. Each
episode asks one of the ${spec.rows.length} bundled questions (\`server/${DATA_FILE_NAME}\`); the
agent answers once and the episode ends with the reward.

## Interface

- \`reset()\` serves the rows in order, \`reset(seed=s)\` row \`s % ${spec.rows.length}\`, \`reset(index=i)\` row \`i\`.
  The observation carries \`question\`, \`system_prompt\`, \`answer_format\` and \`row_index\` — never the gold answer.
- \`step(${names.action}(answer=reply))\` scores the whole reply and returns \`done=True\` with the reward.
  A second step without a reset is an error.
- HTTP \`/reset\` and \`/step\` are stateless (a fresh environment per request), so an HTTP step
  names its row: \`POST /step {"action": {"answer": "..."}, "index": 0}\`.
- Answer format: ${ANSWER_FORMAT_EXAMPLES[spec.answerFormat]}. System prompt:

${fenced(spec.systemPrompt, 'text')}

## Reward

\`${spec.verifierFunction}\` from \`${verifierPath}\`, the audited file shipped byte-for-byte.
\`server/${REWARD_CALL_FILE_NAME}\` calls it the way the gate did: ${completionArg}; it also
receives \`answer\`, \`info\` (the row's), \`state\` (\`{"answer": <gold>}\`), \`task\`
(\`"default"\`) and a minimal \`parser\` where its signature asks for them.

A reward function that raises, or returns something other than a number or a bool
(\`None\`, a string, NaN), is never turned into a reward of 0: \`step()\` raises, the
WebSocket session answers \`{"type": "error", ...}\` and HTTP \`/step\` answers 500. The
episode is over either way; reset for the next question.

${renderAuditSection(spec, verifierPath)}
## Run

${fenced(`uv lock                      # this package ships no lock file; openenv validate wants one
uv run --project . server    # or: pip install -e . && server
openenv validate .`, 'bash')}

Over the WebSocket at \`/ws\`, one session per connection:

${fenced(`{"type": "reset", "data": {"index": 0}}
{"type": "step", "data": {"answer": "<the model's reply>"}}`, 'json')}

Each reply is \`{"type": "observation", "data": {"observation": {...}, "reward": ..., "done": ...}}\`.
From Python:

${fenced(`from ${names.package} import ${names.action}, ${names.client}

with ${names.client}(base_url="http://localhost:8000").sync() as env:
    first = env.reset(index=0)
    result = env.step(${names.action}(answer="..."))
    print(result.reward)`, 'python')}

\`MAX_CONCURRENT_ENVS\` (default 64) bounds the concurrent WebSocket sessions.
`;
}
