import path from 'node:path';
import {
  alternateGold,
  DEFAULT_CHOICES,
  detectAnswerType,
  isCustomFormat,
  isNumeric,
  makeRng,
  optionTexts,
  shapeTwin,
  wrongValues,
  type CustomFormat,
} from './answer-values.js';
import type { GoldContext } from './expand-candidates.js';
import type { AlternateContext } from './invariance.js';
import { loadDatasetFile, sampleRows, type DatasetRow } from './gold-dataset.js';
import type { GatePolicy } from './policy.js';
import { GatekeptError } from '../errors.js';
import { ANSWER_FORMATS, ANSWER_TYPES, type AnswerFormat, type AnswerType } from '../types.js';

/**
 * The first stage of the gate: which rows are audited, as which answer type,
 * and for each gold its seeded wrong values, dump pool and the fresh
 * alternate gold of the invariance test. Pure apart from reading a dataset
 * file, and wholly determined by the seed.
 */

export interface RowsInput {
  answer?: string;
  dataset?: string | readonly { answer: string; prompt?: string | null; info?: Record<string, unknown> }[];
  prompt?: string;
  answerType?: AnswerType | 'auto';
  choices?: readonly string[];
}

export interface GoldPlan {
  row: DatasetRow;
  /** A fresh value of the answer type, unrelated to the gold: always one of the invariance test's alternates. */
  alternate: string | null;
  /** String answers with digits: a second twin of the gold (see shapeTwin), always an alternate too. */
  freshTwin?: string;
  context: GoldContext;
}

/** What the invariance test needs of a planned gold to choose its alternate golds. */
export function alternateContextOf(plan: GoldPlan): AlternateContext {
  return {
    gold: plan.row.answer,
    type: plan.context.type,
    choices: plan.context.choices,
    wrong: plan.context.wrong,
    fresh: plan.alternate,
    twin: plan.context.twin,
    freshTwin: plan.freshTwin,
  };
}

export interface AuditPlan {
  rows: DatasetRow[];
  rowsTotal: number;
  choices: string[];
  answerType: AnswerType;
  plans: GoldPlan[];
}

const WRONG_COUNT = 3;
const DUMP_SIZE = 99;

async function resolveRows(options: RowsInput, policy: GatePolicy, cwd: string): Promise<{ rows: DatasetRow[]; total: number }> {
  if (options.answer !== undefined && options.dataset !== undefined) {
    throw new GatekeptError('BAD_ARGUMENT', 'give either an answer or a dataset, not both');
  }
  if (options.dataset !== undefined) {
    const all =
      typeof options.dataset === 'string'
        ? await loadDatasetFile(path.resolve(cwd, options.dataset))
        : options.dataset.map((row, index) => ({ index, answer: String(row.answer), prompt: row.prompt ?? null, info: row.info ?? {} }));
    if (all.length === 0) throw new GatekeptError('BAD_DATASET', 'the dataset has no rows');
    return { rows: sampleRows(all, policy.budget.rows, policy.seed), total: all.length };
  }
  if (options.answer === undefined || options.answer.trim() === '') {
    throw new GatekeptError('BAD_ARGUMENT', 'no gold answer to audit against', {
      suggestion: 'pass --answer G (the ground truth), or --dataset rows.jsonl',
    });
  }
  return { rows: [{ index: 0, answer: options.answer, prompt: options.prompt ?? null, info: {} }], total: 1 };
}

function resolveAnswerType(rows: readonly DatasetRow[], requested: AnswerType | 'auto', choices: readonly string[] | undefined): AnswerType {
  if (requested !== 'auto') {
    if (!ANSWER_TYPES.includes(requested)) throw new GatekeptError('BAD_ARGUMENT', `unknown answer type ${requested}`);
    // An explicit type must fit every gold, or the wrong values and attacks built from it would be nonsense.
    const misfit = rows.find(
      (row) => (requested === 'numeric' && !isNumeric(row.answer)) || (requested === 'boolean' && detectAnswerType(row.answer, undefined) !== 'boolean'),
    );
    if (misfit) {
      throw new GatekeptError(
        'BAD_ARGUMENT',
        `gold ${JSON.stringify(misfit.answer)}${misfit.index > 0 ? ` (row ${misfit.index + 1})` : ''} is not a ${requested} answer`,
        {
          suggestion:
            requested === 'numeric'
              ? 'give a number such as 42 or -3.5, or use --answer-type string'
              : 'give true/false (or yes/no), or use --answer-type string',
        },
      );
    }
    return requested;
  }
  const types = new Set(rows.map((row) => detectAnswerType(row.answer, choices)));
  return types.size === 1 ? [...types][0]! : 'string';
}

export function planGold(row: DatasetRow, type: AnswerType, choices: readonly string[], seed: number): GoldPlan {
  const rng = makeRng(seed, 'gold', row.index, row.answer);
  const wrong = wrongValues(row.answer, type, WRONG_COUNT, rng, choices);
  if (wrong.length === 0) {
    throw new GatekeptError('BAD_ARGUMENT', `cannot derive a wrong answer for gold ${JSON.stringify(row.answer)} as ${type}`, {
      suggestion: type === 'choice' ? 'pass --choices with at least two labels' : 'check --answer-type',
    });
  }
  const dumpPool = wrongValues(row.answer, type, DUMP_SIZE, makeRng(seed, 'dump', row.index, row.answer), choices);
  // Drawn apart from the wrong values, so it is a value no template states.
  const alternate =
    wrongValues(row.answer, type, WRONG_COUNT + 1, makeRng(seed, 'alternate', row.index, row.answer), choices).find((value) => !wrong.includes(value)) ??
    alternateGold(row.answer, type, makeRng(seed, 'alternate', row.index, row.answer), choices) ??
    null;
  const options = type === 'choice' && row.prompt !== null ? optionTexts(row.prompt, choices, row.answer) : undefined;
  const twin = type === 'string' ? shapeTwin(row.answer, makeRng(seed, 'twin', row.index, row.answer)) : undefined;
  const second = twin !== undefined ? shapeTwin(row.answer, makeRng(seed, 'fresh-twin', row.index, row.answer)) : undefined;
  const freshTwin = second !== undefined && second !== twin ? second : undefined;
  return {
    row,
    alternate,
    ...(freshTwin !== undefined ? { freshTwin } : {}),
    context: { gold: row.answer, type, choices, formats: [], wrong, dumpPool, ...(options ? { options } : {}), ...(twin !== undefined ? { twin } : {}) },
  };
}

export interface FormatPlan {
  /** Built-in formats to attack in, or every accepted one. */
  named: AnswerFormat[] | 'auto';
  /** Declared templates, calibrated and attacked like the built-in ones. */
  custom: CustomFormat[];
  /** As written into the record. */
  label: string;
}

/**
 * `--format`: 'auto', a built-in name, or a template with `{}` where the
 * answer goes; several may be given.
 */
export function resolveFormats(option: string | readonly string[] | undefined): FormatPlan {
  const given = option === undefined ? ['auto'] : typeof option === 'string' ? [option] : [...option];
  const named: AnswerFormat[] = [];
  const custom: CustomFormat[] = [];
  for (const format of given) {
    if (format === 'auto') continue;
    if ((ANSWER_FORMATS as readonly string[]).includes(format)) named.push(format as AnswerFormat);
    else if (isCustomFormat(format) && format.split('{}').length === 2 && format.trim() !== '{}') custom.push(format);
    else {
      throw new GatekeptError('BAD_ARGUMENT', `unknown answer format ${JSON.stringify(format)}`, {
        suggestion: `use one of ${ANSWER_FORMATS.join(', ')}, auto, or a template with one {} where the answer goes, such as '<SOLUTION>{}</SOLUTION>'`,
      });
    }
  }
  const unique = <T>(items: T[]): T[] => [...new Set(items)];
  const label = given.length === 0 ? 'auto' : unique(given).join(' | ');
  return { named: named.length > 0 ? unique(named) : 'auto', custom: unique(custom), label };
}

/**
 * The rows to audit and each one's golds and wrong values. `onRows` hears
 * how many rows there are as soon as they are read, before the (seeded,
 * slower) per-row planning, so workers can be started for them meanwhile.
 */
export async function planAudit(options: RowsInput, policy: GatePolicy, cwd: string, onRows?: (count: number) => void): Promise<AuditPlan> {
  const { rows, total: rowsTotal } = await resolveRows(options, policy, cwd);
  onRows?.(rows.length);
  const choices = options.choices && options.choices.length > 0 ? [...options.choices] : [...DEFAULT_CHOICES];
  const answerType = resolveAnswerType(rows, options.answerType ?? 'auto', options.choices);
  if (answerType === 'choice') {
    const outside = [...new Set(rows.map((row) => row.answer.trim()).filter((gold) => !choices.includes(gold)))];
    if (outside.length > 0) {
      throw new GatekeptError('BAD_ARGUMENT', `gold ${JSON.stringify(outside[0])} is not one of the choices ${choices.join(',')}`, {
        suggestion: `pass every label with --choices, for example --choices ${[...choices, ...outside].join(',')}`,
      });
    }
  }
  const plans = rows.map((row) => planGold(row, answerType, choices, policy.seed));
  return { rows, rowsTotal, choices, answerType, plans };
}
