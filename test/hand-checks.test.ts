/**
 * What a one-answer or small audit reads by hand agrees with the schemas it
 * spares: gate's options and dataset rows are accepted with the same values
 * (defaults, split labels, numbers), and anything else is left to the
 * schema, which says what is wrong.
 */
import { expect, it } from 'vitest';
import { checkedGateOptions, gateOptionsSchema } from '../src/cli/option-schemas.js';
import { checkedRow, datasetRowSchema } from '../src/audit/gold-dataset.js';

it('accepts exactly what the schema accepts, with the same values', () => {
  const base: Record<string, unknown> = { reward: 'v.py:reward', answer: '42', format: [], pythonpath: [] };
  const values: unknown[] = [
    undefined, '', ' ', 'x', '42', '0', '007', '4294967295', '4294967296', '99999999999', '-1', '1.5', '1e3', '256', '257',
    'auto', 'numeric', 'choice', 'bwrap', 'none', 'messages', 'string', 'boxed', '<A>{}</A>',
    'A,B', 'A, B ,C', 'A,A', 'A', ',A,,B,', true, false, 0, 1, null, [], ['boxed'], ['auto', 'xml'], ['nope'], ['{}'], [1], {},
  ];
  const keys = ['reward', 'answer', 'answerType', 'choices', 'format', 'dataset', 'policy', 'seed', 'json', 'strict', 'report', 'python', 'sandbox', 'pythonpath', 'completionFormat', 'workers', 'unknown'];
  const variants: unknown[] = [base, {}, null, 'options', [], { ...base, answer: undefined, dataset: 'rows.jsonl' }, { ...base, dataset: 'rows.jsonl' }];
  for (const key of keys) for (const value of values) variants.push({ ...base, [key]: value });
  for (const variant of variants) {
    const parsed = gateOptionsSchema().safeParse(variant);
    expect(checkedGateOptions(variant), JSON.stringify(variant)).toEqual(parsed.success ? parsed.data : null);
  }
  // Most variants are valid ones: the hand check is the path every valid command line takes.
  expect(variants.filter((variant) => checkedGateOptions(variant) !== null).length).toBeGreaterThan(200);
});

it('reads dataset rows as the schema does', () => {
  const base: Record<string, unknown> = { answer: '42', question: 'q', info: { k: [1] } };
  const values: unknown[] = [undefined, null, '', ' ', '42', 'x', 0, -1.5, true, false, [], ['a'], {}, { a: 1 }, { a: { b: null } }];
  const variants: unknown[] = [base, null, [], '{}', 42, { answer: 7 }, { answer: 'a', prompt: 'p' }, { answer: 'a', question: 'q', prompt: 'p' }, { ...base, extra: 1 }];
  for (const key of ['answer', 'question', 'prompt', 'info']) for (const value of values) variants.push({ ...base, [key]: value });
  for (const variant of variants) {
    const parsed = datasetRowSchema().safeParse(variant);
    const checked = checkedRow(variant, 3);
    if (checked === null) continue;
    // Only what the schema accepts may be read by hand, and into the same row.
    expect(parsed.success, JSON.stringify(variant)).toBe(true);
    if (!parsed.success) continue;
    const row = parsed.data;
    expect(checked, JSON.stringify(variant)).toEqual({ index: 3, answer: String(row.answer), prompt: row.question ?? row.prompt ?? null, info: row.info ?? {} });
  }
  expect(variants.filter((variant) => checkedRow(variant, 0) !== null).length).toBeGreaterThan(20);
});
