import * as z from 'zod';
import { makeRng } from './answer-values.js';
import { GatekeptError } from '../errors.js';
import { isRecord } from '../hand-check.js';
import { readJsonlValues } from '../rows.js';
import { describeIssues } from './policy.js';

/** Dataset rows for auditing a verifier across many golds. */

export interface DatasetRow {
  /** Position in the original dataset (0-based), kept so reports can point at it. */
  index: number;
  answer: string;
  prompt: string | null;
  info: Record<string, unknown>;
}

/** Built on first use: only a run given a dataset reads one. */
const buildRowSchema = () =>
  z
    .object({
      answer: z.union([z.string().refine((text) => text.trim() !== '', 'must not be empty'), z.number(), z.boolean()], {
        error: 'must be a non-empty string, a number or true/false',
      }),
      question: z.string().optional(),
      prompt: z.string().optional(),
      info: z.record(z.string(), z.unknown()).optional(),
    })
    .passthrough();

let rowSchema: ReturnType<typeof buildRowSchema> | undefined;

export function datasetRowSchema(): ReturnType<typeof buildRowSchema> {
  rowSchema ??= buildRowSchema();
  return rowSchema;
}

/**
 * A row the schema accepts, read by hand, or null for the schema to read (and
 * describe what is wrong): building the schema costs a short audit more than
 * reading its rows.
 */
export function checkedRow(value: unknown, index: number): DatasetRow | null {
  if (!isRecord(value)) return null;
  const { answer, question, prompt, info } = value;
  const answerOk =
    (typeof answer === 'string' && answer.trim() !== '') || (typeof answer === 'number' && Number.isFinite(answer)) || typeof answer === 'boolean';
  if (!answerOk || (question !== undefined && typeof question !== 'string') || (prompt !== undefined && typeof prompt !== 'string')) return null;
  if (info !== undefined && !isRecord(info)) return null;
  return { index, answer: String(answer), prompt: question ?? prompt ?? null, info: info === undefined ? {} : { ...info } };
}

export function parseRow(value: unknown, index: number, where: string): DatasetRow {
  const checked = checkedRow(value, index);
  if (checked) return checked;
  const parsed = datasetRowSchema().safeParse(value);
  if (!parsed.success) {
    throw new GatekeptError('BAD_DATASET', `${where}: row ${index + 1} is invalid`, {
      details: describeIssues(parsed.error),
      suggestion: 'each row needs an "answer" (string or number); "question" or "prompt" and "info" are optional',
    });
  }
  const row = parsed.data;
  return { index, answer: String(row.answer), prompt: row.question ?? row.prompt ?? null, info: row.info ?? {} };
}

export async function loadDatasetFile(file: string): Promise<DatasetRow[]> {
  const lines = await readJsonlValues(file, {
    what: 'dataset',
    suggestion: 'pass a JSONL file with one {"answer": ...} object per line',
  });
  const rows = lines.map(({ line, value }, index) => parseRow(value, index, `${file} line ${line}`));
  if (rows.length === 0) {
    throw new GatekeptError('BAD_DATASET', `${file} has no rows`, { suggestion: 'add at least one {"answer": ...} line' });
  }
  return rows;
}

/** A deterministic sample of at most `count` rows, kept in dataset order. */
export function sampleRows<T extends { index: number }>(rows: readonly T[], count: number, seed: number): T[] {
  if (rows.length <= count) return [...rows];
  const rng = makeRng(seed, 'row-sample', rows.length);
  const order = rows.map((row) => ({ row, key: rng() }));
  order.sort((a, b) => a.key - b.key);
  return order
    .slice(0, count)
    .map((entry) => entry.row)
    .sort((a, b) => a.index - b.index);
}
