/**
 * Render a passed environment as a package for the `verifiers` library's
 * classic API (`import verifiers as vf`, 0.3.x): a module whose
 * `load_environment()` builds a `vf.SingleTurnEnv` from the bundled rows,
 * scored by a `vf.Rubric` around the gated verifier.
 */
import {
  ANSWER_FORMAT_EXAMPLES,
  DATA_FILE_NAME,
  PACKAGE_VERSION,
  REWARD_CALL_FILE_NAME,
  REWARD_CALL_SOURCE,
  VERIFIER_FILE_NAME,
  assertRenderableSpec,
  fenced,
  moduleName,
  pyString,
  renderAuditSection,
  renderRows,
  tomlString,
} from '../environment-spec.js';
import type { EnvironmentSpec, PackageFiles } from '../environment-spec.js';

export { VERIFIER_FILE_NAME } from '../environment-spec.js';
export type { EnvironmentSpec } from '../environment-spec.js';

/** The verifiers releases the emitted code is written and tested against. */
export const VERIFIERS_REQUIREMENT = 'verifiers>=0.3.1,<0.4';

/**
 * The dataset column that carries each row's info, as JSON text. verifiers
 * reads keys of its own `info` column (`task`, `tool_defs`, ...) and Arrow
 * would merge differently shaped objects, so the gate's info travels apart.
 */
export const INFO_COLUMN = 'gatekept_info';

const EVAL_EXAMPLES = 5;
const EVAL_ROLLOUTS = 3;

/** Paths are relative to `verifiers/<envId>/`. */
export function renderVerifiersPackage(spec: EnvironmentSpec): PackageFiles {
  assertRenderableSpec(spec);
  const module = moduleName(spec.envId);
  return new Map<string, string>([
    ['pyproject.toml', renderPyproject(spec, module)],
    ['README.md', renderReadme(spec, module)],
    [`${module}/__init__.py`, renderInit(spec, module)],
    [`${module}/${module}.py`, renderEnvironment(spec)],
    [`${module}/${VERIFIER_FILE_NAME}`, spec.verifierSource],
    [`${module}/${REWARD_CALL_FILE_NAME}`, REWARD_CALL_SOURCE],
    [`${module}/${DATA_FILE_NAME}`, renderRows(spec.rows)],
  ]);
}

function evalExamples(spec: EnvironmentSpec): number {
  return Math.min(EVAL_EXAMPLES, spec.rows.length);
}

function renderPyproject(spec: EnvironmentSpec, module: string): string {
  // vf-eval reads [tool.verifiers.eval] from a pyproject.toml inside the
  // installed module's directory, so the wheel carries a copy there.
  return `[project]
name = ${tomlString(spec.envId)}
version = ${tomlString(PACKAGE_VERSION)}
description = ${tomlString(spec.description)}
tags = ["gatekept", "single-turn", ${tomlString(spec.answerFormat)}]
requires-python = ">=3.11"
dependencies = [${tomlString(VERIFIERS_REQUIREMENT)}]

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build]
include = ["${module}/*.py", "${module}/${DATA_FILE_NAME}", "pyproject.toml", "README.md"]

[tool.hatch.build.targets.wheel]
packages = [${tomlString(module)}]

[tool.hatch.build.targets.wheel.force-include]
"pyproject.toml" = "${module}/pyproject.toml"

[tool.verifiers.eval]
num_examples = ${evalExamples(spec)}
rollouts_per_example = ${EVAL_ROLLOUTS}
`;
}

function renderInit(spec: EnvironmentSpec, module: string): string {
  return `${pyString(spec.description)}

from .${module} import load_environment

__all__ = ["load_environment"]
`;
}

function renderParser(spec: EnvironmentSpec): string {
  // Only parse_answer (what vf-eval shows as the parsed answer) uses it; the
  // verifier does its own extraction.
  return spec.answerFormat === 'xml' ? 'vf.XMLParser(["answer"], answer_field="answer")' : 'vf.Parser()';
}

function renderEnvironment(spec: EnvironmentSpec): string {
  const verifierModule = VERIFIER_FILE_NAME.replace(/\.py$/, '');
  const rewardModule = REWARD_CALL_FILE_NAME.replace(/\.py$/, '');
  return `"""The ${spec.envId} environment: bundled rows, one reply each, scored by the gated verifier."""

import json
from pathlib import Path
from typing import Any

import verifiers as vf
from datasets import Dataset

from . import ${verifierModule}
from .${rewardModule} import score_async

ENV_ID = ${pyString(spec.envId)}
SYSTEM_PROMPT = ${pyString(spec.systemPrompt)}
ANSWER_FORMAT = ${pyString(spec.answerFormat)}
COMPLETION_FORMAT = ${pyString(spec.completionFormat)}
VERIFIER_NAME = ${pyString(spec.verifierFunction)}
VERIFIER = getattr(${verifierModule}, VERIFIER_NAME)
DATA_FILE = Path(__file__).with_name(${pyString(DATA_FILE_NAME)})
INFO_COLUMN = ${pyString(INFO_COLUMN)}

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


async def gated_reward(prompt: Any, completion: Any, answer: Any = "", question: Any = None, ${INFO_COLUMN}: Any = None) -> float:
    # verifiers hands over its own message objects, the whole dataset row and
    # the rollout state; the gate audited plain-dict messages and a fixed pool,
    # so the call is rebuilt from the reply text, the question, the gold and the info.
    return await score_async(
        VERIFIER,
        COMPLETION_FORMAT,
        text=_last_text(completion, "assistant"),
        answer=answer if isinstance(answer, str) else str(answer),
        question=question if isinstance(question, str) else _last_text(prompt, "user"),
        info=json.loads(${INFO_COLUMN}) if isinstance(${INFO_COLUMN}, str) else {},
    )


# Rubric reports each reward under its function's name.
gated_reward.__name__ = VERIFIER_NAME
gated_reward.__qualname__ = VERIFIER_NAME


def load_environment(**kwargs: Any) -> vf.Environment:
    """A SingleTurnEnv over the bundled rows; keyword arguments go to vf.SingleTurnEnv."""
    replaced = sorted(set(kwargs) & set(AUDITED_ARGUMENTS))
    if replaced:
        raise ValueError(f"{ENV_ID}: {', '.join(replaced)} cannot be replaced; the audit covers the bundled ones")
    parser = kwargs.pop("parser", None) or ${renderParser(spec)}
    options: dict[str, Any] = {"system_prompt": SYSTEM_PROMPT, **kwargs}
    return vf.SingleTurnEnv(
        dataset=build_dataset(),
        eval_dataset=build_dataset(),
        parser=parser,
        rubric=vf.Rubric(funcs=[gated_reward], weights=[1.0], parser=parser),
        **options,
    )
`;
}

function renderReadme(spec: EnvironmentSpec, module: string): string {
  const verifierPath = `${module}/${VERIFIER_FILE_NAME}`;
  const completionArg =
    spec.completionFormat === 'messages'
      ? '`completion` is `[{"role": "assistant", "content": <reply>}]` and `prompt` is `[{"role": "user", "content": <question>}]`, plain dicts'
      : '`completion` is the reply text and `prompt` the question text';
  const n = evalExamples(spec);
  return `# ${spec.envId}

${spec.description}

A single-turn environment for [verifiers](https://github.com/PrimeIntellect-ai/verifiers)
(\`${VERIFIERS_REQUIREMENT}\`, the classic \`import verifiers as vf\` API), written by
gatekept after its reward function passed an adversarial audit.

## Task

Each of the ${spec.rows.length} bundled rows (\`${module}/${DATA_FILE_NAME}\`) is one question; the model
gets one reply. \`load_environment()\` builds the dataset in memory from that file, so
nothing is downloaded (it works with \`HF_DATASETS_OFFLINE=1\`). System prompt:

${fenced(spec.systemPrompt, 'text')}

Answer format: ${ANSWER_FORMAT_EXAMPLES[spec.answerFormat]}.

## Reward

One reward, weight 1.0, reported as \`${spec.verifierFunction}\`: the function of that name in
\`${verifierPath}\`, the audited file shipped byte-for-byte.
\`${module}/${REWARD_CALL_FILE_NAME}\` calls it the way the gate did, not the way a
\`vf.Rubric\` would: ${completionArg}; it also receives \`answer\`, \`info\` (the row's),
\`state\` (\`{"answer": <gold>}\`), \`task\` (\`"default"\`) and a minimal \`parser\` where its
signature asks for them. Only the last assistant message's text reaches the verifier.
The environment's parser (\`${spec.answerFormat === 'xml' ? 'vf.XMLParser(["answer"])' : 'vf.Parser()'}\`) only feeds the parsed answer
verifiers reports; the reward never sees it.

A reward function that raises, or returns something other than a number or a bool
(\`None\`, a string, NaN), fails the call; \`vf.Rubric\` then logs the error and scores the
rollout 0.0, as it does for any reward function. Watch the log for
\`Error calling reward function ${spec.verifierFunction}\`.

${renderAuditSection(spec, verifierPath)}
## Install and evaluate

${fenced(`pip install .             # or: uv pip install .
vf-eval ${spec.envId} -m <model> -n ${n} -r ${EVAL_ROLLOUTS}`, 'bash')}

\`vf-eval\` imports the module \`${module}\` and calls \`load_environment()\`; \`-n\` and \`-r\`
default to \`[tool.verifiers.eval]\` in \`pyproject.toml\` (${n} examples, ${EVAL_ROLLOUTS} rollouts each),
which the wheel carries inside the module (an editable install does not: pass \`-n\` and \`-r\`).
\`vf-eval --help\` lists the model and endpoint options. In Python:

${fenced(`import verifiers as vf

# The way vf-eval finds it; \`from ${module} import load_environment\` works too.
env = vf.load_environment(${pyString(spec.envId)})
print(env.get_eval_dataset())  # question, answer, prompt, ...`, 'python')}

Build the environment in the main thread: verifiers installs signal handlers when
it constructs one. \`load_environment(**kwargs)\` passes keyword arguments on to
\`vf.SingleTurnEnv\` (\`sampling_args\`, \`system_prompt\`, \`parser\`, ...); it refuses
\`dataset\`, \`eval_dataset\` and \`rubric\`, which the audit covers.
`;
}
