/**
 * What the package emitters share: the spec of an environment that passed the
 * gate, the Python module that calls the gated verifier, and the escaping
 * helpers that keep arbitrary user text inert inside Python, TOML, YAML and
 * Markdown templates.
 */
import { createHash } from 'node:crypto';

import { MIN_SAMPLES } from '../env-audit/checks/reward-distribution.js';
import { GatekeptError } from '../errors.js';
import type { Row } from '../rows.js';
import { readShippedFile, renderTemplate } from './render-template.js';
import { ANSWER_FORMATS, COMPLETION_FORMATS } from '../types.js';
import type { AnswerFormat, CompletionFormat } from '../types.js';

export interface EnvironmentRow extends Row {
  /** The gold written in the environment's answer format, and the reward the gated verifier gave it. */
  gold?: { reply: string; reward: number };
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
  /**
   * Modules the verifier imports from its own directory (file name → source),
   * gated beside it and shipped byte for byte next to it: the built-in
   * verifiers' answer-slot reader.
   */
  verifierModules?: Readonly<Record<string, string>>;
  /** 'messages': called with chat-message completions; 'string': with the plain text. */
  completionFormat: CompletionFormat;
  audit: PassedAudit;
  toolVersion: string;
}

/** A rendered package: POSIX paths relative to the package root → file contents. */
export type PackageFiles = Map<string, string>;

export const VERIFIER_FILE_NAME = 'gatekept_verifier.py';
export const REWARD_CALL_FILE_NAME = 'gatekept_reward.py';
/** The answer-slot reader the built-in verifiers import (templates/verifiers/). */
export const SLOT_READER_FILE_NAME = 'gatekept_slots.py';
export const DATA_FILE_NAME = 'data.jsonl';

/** The version every emitted package starts at; users bump it when they edit the package. */
export const PACKAGE_VERSION = '0.1.0';

const ENV_ID_PATTERN = /^[a-z][a-z0-9-]*$/;
const PY_IDENTIFIER_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

const PYTHON_KEYWORDS: ReadonlySet<string> = new Set([
  'False',
  'None',
  'True',
  'and',
  'as',
  'assert',
  'async',
  'await',
  'break',
  'class',
  'continue',
  'def',
  'del',
  'elif',
  'else',
  'except',
  'finally',
  'for',
  'from',
  'global',
  'if',
  'import',
  'in',
  'is',
  'lambda',
  'nonlocal',
  'not',
  'or',
  'pass',
  'raise',
  'return',
  'try',
  'while',
  'with',
  'yield',
]);

// Installed as top-level modules, these ids would shadow (or be shadowed by)
// the libraries the packages import.
const RESERVED_MODULES: ReadonlySet<string> = new Set([
  'verifiers',
  'openenv',
  'server',
  'models',
  'client',
  'pydantic',
  'fastapi',
  'uvicorn',
  'gatekept_verifier',
  'gatekept_reward',
  'gatekept_slots',
]);

/** A module shipped beside the verifier: named like gatekept's own, so it meets no file of the package's. */
const MODULE_FILE_PATTERN = /^gatekept_[a-z0-9_]+\.py$/;

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
  for (const name of Object.keys(spec.verifierModules ?? {})) {
    if (!MODULE_FILE_PATTERN.test(name) || name === VERIFIER_FILE_NAME || name === REWARD_CALL_FILE_NAME) {
      problems.push(`verifierModules: ${JSON.stringify(name)} is not a module file name the package can carry beside the verifier`);
    }
  }
  if (spec.rows.length === 0) problems.push('rows is empty: an environment needs at least one row');
  spec.rows.forEach((row, index) => {
    if (typeof row.question !== 'string' || typeof row.answer !== 'string') {
      problems.push(`rows[${index}] needs string question and answer`);
    }
    if (row.info !== undefined && (row.info === null || typeof row.info !== 'object' || Array.isArray(row.info))) {
      problems.push(`rows[${index}].info must be an object`);
    }
    if (row.gold !== undefined && (typeof row.gold.reply !== 'string' || !Number.isFinite(row.gold.reward))) {
      problems.push(`rows[${index}].gold needs a string reply and a finite reward`);
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

/**
 * One JSON object per row, in order; `info` defaults to `{}` so every line has
 * the same keys. `gold_reply` and `gold_reward` (the gold as the gate scored
 * it) follow when known: the ground truth a package can check itself against.
 */
export function renderRows(rows: readonly EnvironmentRow[]): string {
  return rows
    .map((row) =>
      JSON.stringify({
        question: row.question,
        answer: row.answer,
        info: row.info ?? {},
        ...(row.gold ? { gold_reply: row.gold.reply, gold_reward: row.gold.reward } : {}),
      }),
    )
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

/** How the verifier receives the reply and the question, per completion format (README prose). */
export const COMPLETION_ARGUMENT: Readonly<Record<CompletionFormat, string>> = {
  messages: '`completion` is `[{"role": "assistant", "content": <reply>}]` and `prompt` is `[{"role": "user", "content": <question>}]`, plain dicts',
  string: '`completion` is the reply text and `prompt` the question text',
};

function formatPercent(fraction: number): string {
  return `${Number((fraction * 100).toFixed(2))}%`;
}

/** The README section every package carries: what was audited, and what a PASS does not mean. */
export function renderAuditSection(spec: EnvironmentSpec, verifierPath: string): string {
  const { audit } = spec;
  const level = audit.budget?.confidence;
  const budgetRow = audit.budget
    ? renderTemplate('common/audit-budget-row.md', {
        candidates: String(audit.budget.candidates),
        rows: String(audit.budget.rows),
        row_word: audit.budget.rows === 1 ? 'row' : 'rows',
      })
    : '';
  return renderTemplate('common/audit-section.md', {
    tool_version: spec.toolVersion,
    verifier_function: spec.verifierFunction,
    verifier_path: verifierPath,
    decision: audit.decision,
    hackability: audit.hackability.toFixed(1),
    hack_rate_ci_hi: audit.hackRateCiHi.toFixed(3),
    interval: level === undefined ? 'the confidence interval' : `the ${formatPercent(level)} confidence interval`,
    budget_row: budgetRow,
    seed: String(audit.seed),
    corpus_version: audit.corpusVersion,
    corpus_hash: audit.corpusHash,
    verifier_sha256: audit.verifierSha256,
  });
}

/**
 * The calling convention of the gate: the module the harness itself imports,
 * shipped byte for byte next to the verifier in every package, so a reward in
 * training receives the same arguments the verifier received while audited.
 */
function rewardCallSource(): string {
  return readShippedFile(`python/${REWARD_CALL_FILE_NAME}`);
}

/** The answer-slot reader, a module of its own so that the four built-in verifiers share one copy. */
export function slotReaderSource(): string {
  return readShippedFile(`templates/verifiers/${SLOT_READER_FILE_NAME}`);
}

/**
 * The files every package carries in the directory `dir` that holds its
 * verifier: the gated verifier and the modules it imports, byte for byte, and
 * the calling convention it was gated under.
 */
export function verifierFiles(spec: EnvironmentSpec, dir: string): [string, string][] {
  return [
    [`${dir}/${VERIFIER_FILE_NAME}`, spec.verifierSource],
    ...Object.entries(spec.verifierModules ?? {}).map(([name, source]): [string, string] => [`${dir}/${name}`, source]),
    [`${dir}/${REWARD_CALL_FILE_NAME}`, rewardCallSource()],
  ];
}

const EVAL_EXAMPLES = 5;
const EVAL_ROLLOUTS = 3;

/**
 * The `vf-eval -n EXAMPLES -r ROLLOUTS` an emitted README suggests: a few
 * examples, with enough rollouts each that the run gives at least
 * MIN_SAMPLES samples, so its results can be checked by `audit --env`.
 */
export function evalPlan(rows: number): { examples: number; rollouts: number } {
  const examples = Math.max(1, Math.min(EVAL_EXAMPLES, rows));
  return { examples, rollouts: Math.max(EVAL_ROLLOUTS, Math.ceil(MIN_SAMPLES / examples)) };
}
