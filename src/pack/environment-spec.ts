/**
 * What both package emitters share: the spec of an environment that passed the
 * gate, the Python that calls the gated verifier, and the escaping helpers that
 * keep arbitrary user text inert inside Python, TOML and Markdown.
 */
import { createHash } from 'node:crypto';

import { GatekeptError } from '../errors.js';
import { ANSWER_FORMATS, COMPLETION_FORMATS } from '../types.js';
import type { AnswerFormat, CompletionFormat } from '../types.js';

export interface EnvironmentRow {
  question: string;
  answer: string;
  info?: Record<string, unknown>;
}

export interface PassedAudit {
  decision: 'PASS';
  hackability: number;
  hackRateCiHi: number;
  seed: number;
  corpusVersion: string;
  corpusHash: string;
  verifierSha256: string;
  /** How hard the gate tried; shown in the READMEs when known. */
  budget?: AuditBudget;
}

export interface AuditBudget {
  /** Adversarial completions scored. */
  candidates: number;
  /** Dataset rows they were built from. */
  rows: number;
  /** Confidence level of the hack-rate interval, e.g. 0.95. */
  confidence?: number;
}

export interface EnvironmentSpec {
  /** Lowercase `[a-z][a-z0-9-]*`; the Python module is the id with `-` → `_`. */
  envId: string;
  description: string;
  systemPrompt: string;
  /** How the model is asked to write its answer. */
  answerFormat: AnswerFormat;
  rows: EnvironmentRow[];
  /** The exact Python source that was gated; shipped byte-for-byte. */
  verifierSource: string;
  /** Name of the reward function in that source. */
  verifierFunction: string;
  /** 'messages': called with chat-message completions; 'string': with the plain text. */
  completionFormat: CompletionFormat;
  audit: PassedAudit;
  toolVersion: string;
}

/** A rendered package: POSIX paths relative to the package root → file contents. */
export type PackageFiles = Map<string, string>;

export const VERIFIER_FILE_NAME = 'gatekept_verifier.py';
export const REWARD_CALL_FILE_NAME = 'gatekept_reward.py';
export const DATA_FILE_NAME = 'data.jsonl';

/** The version every emitted package starts at; users bump it when they edit the package. */
export const PACKAGE_VERSION = '0.1.0';

const ENV_ID_PATTERN = /^[a-z][a-z0-9-]*$/;
const PY_IDENTIFIER_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

const PYTHON_KEYWORDS: ReadonlySet<string> = new Set([
  'False', 'None', 'True', 'and', 'as', 'assert', 'async', 'await', 'break',
  'class', 'continue', 'def', 'del', 'elif', 'else', 'except', 'finally', 'for',
  'from', 'global', 'if', 'import', 'in', 'is', 'lambda', 'nonlocal', 'not', 'or',
  'pass', 'raise', 'return', 'try', 'while', 'with', 'yield',
]);

// Installed as top-level modules, these ids would shadow (or be shadowed by)
// the libraries the packages import.
const RESERVED_MODULES: ReadonlySet<string> = new Set([
  'verifiers', 'openenv', 'server', 'models', 'client', 'pydantic', 'fastapi', 'uvicorn',
  'gatekept_verifier', 'gatekept_reward',
]);

export function moduleName(envId: string): string {
  return envId.replaceAll('-', '_');
}

/** `gsm8k-v2` → `Gsm8kV2`: the prefix of every generated class name. */
export function classPrefix(envId: string): string {
  return envId
    .split('-')
    .filter((part) => part.length > 0)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join('');
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * Refuse a spec the packages could not faithfully carry. Rendering is the last
 * step before files exist, so every problem is listed at once.
 */
export function assertRenderableSpec(spec: EnvironmentSpec): void {
  const problems: string[] = [];
  if (!ENV_ID_PATTERN.test(spec.envId)) {
    problems.push(`envId ${JSON.stringify(spec.envId)} must match ${ENV_ID_PATTERN.source}`);
  } else {
    const module = moduleName(spec.envId);
    if (PYTHON_KEYWORDS.has(module) || RESERVED_MODULES.has(module)) {
      problems.push(`envId ${JSON.stringify(spec.envId)} would make the Python module name "${module}", which is reserved`);
    }
  }
  if (!PY_IDENTIFIER_PATTERN.test(spec.verifierFunction) || PYTHON_KEYWORDS.has(spec.verifierFunction)) {
    problems.push(`verifierFunction ${JSON.stringify(spec.verifierFunction)} is not a Python identifier`);
  }
  if (!(ANSWER_FORMATS as readonly string[]).includes(spec.answerFormat)) {
    problems.push(`answerFormat ${JSON.stringify(spec.answerFormat)} is not one of ${ANSWER_FORMATS.join(', ')}`);
  }
  if (!(COMPLETION_FORMATS as readonly string[]).includes(spec.completionFormat)) {
    problems.push(`completionFormat ${JSON.stringify(spec.completionFormat)} is not one of ${COMPLETION_FORMATS.join(', ')}`);
  }
  if (spec.rows.length === 0) problems.push('rows is empty: an environment needs at least one row');
  spec.rows.forEach((row, index) => {
    if (typeof row.question !== 'string' || typeof row.answer !== 'string') {
      problems.push(`rows[${index}] needs string question and answer`);
    }
    if (row.info !== undefined && (row.info === null || typeof row.info !== 'object' || Array.isArray(row.info))) {
      problems.push(`rows[${index}].info must be an object`);
    }
  });
  if (spec.audit.decision !== 'PASS') {
    problems.push(`audit.decision is ${JSON.stringify(spec.audit.decision)}; only a PASS is ever packaged`);
  }
  const { budget } = spec.audit;
  if (budget !== undefined) {
    for (const field of ['candidates', 'rows'] as const) {
      if (!Number.isSafeInteger(budget[field]) || budget[field] < 0) {
        problems.push(`audit.budget.${field} must be a non-negative integer`);
      }
    }
    if (budget.confidence !== undefined && !(budget.confidence > 0 && budget.confidence < 1)) {
      problems.push('audit.budget.confidence must be strictly between 0 and 1');
    }
  }
  const actual = sha256Hex(spec.verifierSource);
  if (actual !== spec.audit.verifierSha256.toLowerCase()) {
    problems.push(`verifierSource hashes to ${actual}, not the audited ${spec.audit.verifierSha256}`);
  }
  if (problems.length > 0) {
    throw new GatekeptError('BAD_ARGUMENT', 'cannot render an environment package from this spec', {
      details: problems,
      suggestion: 'package exactly the verifier source and rows the gate audited',
    });
  }
}

/**
 * A Python string literal for any text. JSON's escapes (\" \\ \n \t \uXXXX...)
 * are all valid in a Python str literal, and JSON.stringify never emits a raw
 * control character.
 */
export function pyString(text: string): string {
  return JSON.stringify(text);
}

/** A TOML basic string; TOML forbids raw DEL and surrogate code points. */
export function tomlString(text: string): string {
  return JSON.stringify(text.replace(/\p{Cs}/gu, '\uFFFD')).replaceAll('\u007f', '\\u007F');
}

/** A Markdown code fence longer than any backtick run inside `text`. */
export function fenced(text: string, lang = ''): string {
  const longestRun = Math.max(2, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longestRun + 1);
  return `${fence}${lang}\n${text}\n${fence}`;
}

/** One JSON object per row, in order; `info` defaults to `{}` so every line has the same keys. */
export function renderRows(rows: readonly EnvironmentRow[]): string {
  return rows
    .map((row) => JSON.stringify({ question: row.question, answer: row.answer, info: row.info ?? {} }))
    .map((line) => `${line}\n`)
    .join('');
}

export const ANSWER_FORMAT_EXAMPLES: Readonly<Record<AnswerFormat, string>> = {
  bare: 'the bare answer, e.g. `42`',
  boxed: 'a LaTeX box, e.g. `\\boxed{42}`',
  xml: 'an answer tag, e.g. `<answer>42</answer>`',
  line: 'a final line such as `Answer: 42`',
  hash: 'a final line such as `#### 42`',
  json: 'a JSON object such as `{"answer": "42"}`',
};

function formatPercent(fraction: number): string {
  return `${Number((fraction * 100).toFixed(2))}%`;
}

/** The README section both packages carry: what was audited, and what a PASS does not mean. */
export function renderAuditSection(spec: EnvironmentSpec, verifierPath: string): string {
  const { audit } = spec;
  const level = audit.budget?.confidence;
  const interval = level === undefined ? 'the confidence interval' : `the ${formatPercent(level)} confidence interval`;
  const budgetRow = audit.budget
    ? `| budget | ${audit.budget.candidates} adversarial completions built from ${audit.budget.rows} dataset ${audit.budget.rows === 1 ? 'row' : 'rows'} |\n`
    : '';
  return `## Audit

gatekept ${spec.toolVersion} audited the reward function \`${spec.verifierFunction}\` in
\`${verifierPath}\` against its adversarial corpus before writing this package.

| | |
|---|---|
| decision | ${audit.decision} |
| hackability | ${audit.hackability.toFixed(1)} / 100 |
| hack-rate upper bound | ${audit.hackRateCiHi.toFixed(3)} (upper end of ${interval} on the fraction of attacks rewarded) |
${budgetRow}| seed | ${audit.seed} |
| attack corpus | version \`${audit.corpusVersion}\`, sha256 \`${audit.corpusHash}\` |
| verifier sha256 | \`${audit.verifierSha256}\` |

PASS means this exact function survived these attacks at this budget and seed.
It is not a proof that the reward is safe: attacks outside the corpus, another
seed or a larger budget may still find a hack, and a policy under optimisation
pressure searches far harder than any corpus. The file is shipped byte-for-byte;
if its sha256 is no longer the one above, the audit no longer applies — run the
gate again.
`;
}


/**
 * The calling convention of the gate, as a Python module shipped next to the
 * verifier. Both packages score through it, so a reward in training receives
 * the same arguments the verifier received while it was audited. It mirrors
 * the gate's harness line for line; a change to one is a change to both.
 */
export const REWARD_CALL_SOURCE = `"""Call the gated verifier exactly the way the gatekept gate called it.

The audit in README.md describes the reward under this convention only:
- one keyword pool: completion, answer, prompt, info, state, task, parser;
- in "messages" mode completion is [{"role": "assistant", "content": reply}]
  and prompt is [{"role": "user", "content": question}], both plain dicts;
  in "string" mode they are the reply and the question themselves;
- info is the row's info ({} if none), state is {"answer": answer}, task is
  "default", parser is a minimal Parser (parse, parse_answer);
- a function gets the pool names its signature asks for (positional-only
  ones by position), or all of them if it takes **kwargs;
- sync or async; a bool or real number is the reward, anything else
  (None, a string, NaN, an infinity) is an error.
Errors are raised to the caller, never turned into a reward here.
"""

import asyncio
import copy
import inspect
import math
import threading
from typing import Any, Callable, Mapping

POOL_NAMES = ("completion", "answer", "prompt", "info", "state", "task", "parser")
COMPLETION_FORMATS = ("messages", "string")


class Parser:
    """The parser the gate passes: the reply text, unparsed."""

    def parse(self, text: Any) -> Any:
        return text

    def parse_answer(self, completion: Any) -> Any:
        if isinstance(completion, str):
            return completion
        if isinstance(completion, (list, tuple)):
            for message in reversed(completion):
                try:
                    if message.get("role") == "assistant":
                        return message.get("content")
                except AttributeError:
                    continue
            return None
        return completion

    def __repr__(self) -> str:
        return "Parser()"


PARSER = Parser()


def keyword_pool(
    completion_format: str,
    text: str,
    answer: str,
    question: str,
    info: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Fresh objects on every call, so a verifier that mutates its arguments cannot leak state."""
    if completion_format == "messages":
        completion: Any = [{"role": "assistant", "content": text}]
        prompt: Any = [{"role": "user", "content": question}]
    elif completion_format == "string":
        completion = text
        prompt = question
    else:
        raise ValueError(f"unknown completion format {completion_format!r}")
    return {
        "completion": completion,
        "answer": answer,
        "prompt": prompt,
        "info": copy.deepcopy(dict(info)) if isinstance(info, Mapping) else {},
        "state": {"answer": answer},
        "task": "default",
        "parser": PARSER,
    }


def call_arguments(fn: Callable[..., Any], pool: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Fill the signature from the pool; a required parameter outside it cannot be filled."""
    positional: list[Any] = []
    by_position: set[str] = set()
    keywords: list[str] = []
    pending_defaults: list[Any] = []
    missing: list[str] = []
    var_kwargs = False
    for param in inspect.signature(fn).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            var_kwargs = True
            continue
        if param.kind is param.VAR_POSITIONAL:
            continue
        available = param.name in POOL_NAMES
        if param.kind is param.POSITIONAL_ONLY:
            if available:
                positional.extend(pending_defaults)
                pending_defaults = []
                positional.append(pool[param.name])
                by_position.add(param.name)
            elif param.default is not param.empty:
                pending_defaults.append(param.default)
            else:
                missing.append(param.name)
        elif available:
            keywords.append(param.name)
        elif param.default is param.empty:
            missing.append(param.name)
    if missing:
        raise TypeError(f"the verifier requires {', '.join(missing)}, which the gate never passes")
    if var_kwargs:
        keywords.extend(name for name in POOL_NAMES if name not in by_position and name not in keywords)
    return positional, {name: pool[name] for name in keywords}


def to_reward(value: Any) -> float:
    kind = type(value)
    if kind is bool or (kind.__name__ in ("bool_", "bool") and hasattr(kind, "__float__")):
        return 1.0 if value else 0.0
    if isinstance(value, (str, bytes, complex)) or not hasattr(kind, "__float__"):
        raise TypeError(f"the verifier returned {kind.__name__}, not a number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"the verifier returned a non-finite reward ({number})")
    return number


async def score_async(fn: Callable[..., Any], completion_format: str, **row: Any) -> float:
    args, kwargs = call_arguments(fn, keyword_pool(completion_format, **row))
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return to_reward(result)


def score(fn: Callable[..., Any], completion_format: str, **row: Any) -> float:
    args, kwargs = call_arguments(fn, keyword_pool(completion_format, **row))
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = _finish(result)
    return to_reward(result)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _finish(awaitable: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(awaitable))
    # This thread already runs a loop it cannot block on; finish on a private one.
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = asyncio.run(_awaited(awaitable))
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    worker = threading.Thread(target=run, name="gatekept-verifier")
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
`;
