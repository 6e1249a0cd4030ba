/**
 * gate's options checked by hand agree with its schema: the same options are
 * accepted, with the same values (defaults, split labels, numbers), and
 * anything else is left to the schema, which says what is wrong.
 */
import { expect, it } from 'vitest';
import { checkedGateOptions, gateOptionsSchema } from '../src/cli/option-schemas.js';

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
