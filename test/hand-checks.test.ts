/**
 * What a one-answer or small audit reads by hand agrees with the schemas it
 * spares: gate's options, policy files and dataset rows are accepted with the same values
 * (defaults, split labels, numbers), and anything else is left to the
 * schema, which says what is wrong.
 */
import { expect, it } from 'vitest';
import { checkedGateOptions, gateOptionsSchema } from '../src/cli/option-schemas.js';
import { checkedRow, datasetRowSchema } from '../src/audit/gold-dataset.js';
import { checkedPolicy, policyFileSchema } from '../src/audit/policy.js';

it('accepts exactly what the schema accepts, with the same values', () => {
  const base: Record<string, unknown> = { reward: 'v.py:reward', answer: '42', format: [], pythonpath: [] };
  const values: unknown[] = [
    undefined,
    '',
    ' ',
    'x',
    '42',
    '0',
    '007',
    '4294967295',
    '4294967296',
    '99999999999',
    '-1',
    '1.5',
    '1e3',
    '256',
    '257',
    'auto',
    'numeric',
    'choice',
    'bwrap',
    'none',
    'messages',
    'string',
    'boxed',
    '<A>{}</A>',
    'A,B',
    'A, B ,C',
    'A,A',
    'A',
    ',A,,B,',
    true,
    false,
    0,
    1,
    null,
    [],
    ['boxed'],
    ['auto', 'xml'],
    ['nope'],
    ['{}'],
    [1],
    {},
  ];
  const keys = [
    'reward',
    'answer',
    'answerType',
    'choices',
    'format',
    'dataset',
    'policy',
    'seed',
    'json',
    'strict',
    'report',
    'python',
    'sandbox',
    'pythonpath',
    'completionFormat',
    'workers',
    'ray',
    'rayPython',
    'unknown',
  ];
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
  const variants: unknown[] = [
    base,
    null,
    [],
    '{}',
    42,
    { answer: 7 },
    { answer: 'a', prompt: 'p' },
    { answer: 'a', question: 'q', prompt: 'p' },
    { ...base, extra: 1 },
  ];
  for (const key of ['answer', 'question', 'prompt', 'info']) for (const value of values) variants.push({ ...base, [key]: value });
  for (const variant of variants) {
    const parsed = datasetRowSchema().safeParse(variant);
    const checked = checkedRow(variant, 3);
    if (checked === null) continue;
    // Only what the schema accepts may be read by hand, and into the same row.
    expect(parsed.success, JSON.stringify(variant)).toBe(true);
    if (!parsed.success) continue;
    const row = parsed.data;
    expect(checked, JSON.stringify(variant)).toEqual({
      index: 3,
      answer: String(row.answer),
      prompt: row.question ?? row.prompt ?? null,
      info: row.info ?? {},
    });
  }
  expect(variants.filter((variant) => checkedRow(variant, 0) !== null).length).toBeGreaterThan(20);
});

it('reads policies as the schema does', () => {
  const full = {
    max_hackability: 15,
    max_hack_rate_ci_hi: 0.25,
    seed: 7,
    strict: true,
    budget: { rows: 3, bootstrap_resamples: 500, confidence: 0.9 },
    timeouts: { call_ms: 2000, import_ms: 5000, total_s: 60, max_call_ms: 1500 },
    limits: { memory_mb: 512 },
    env_audit: { weights: { integrity: 1, reward_design: 0, dataset_health: 2, contamination: 0, reward_distribution: 0 } },
  };
  const numbers: unknown[] = [
    undefined,
    0,
    0.5,
    1,
    1.5,
    2,
    10,
    63,
    64,
    99.9,
    100,
    200,
    600_000,
    600_001,
    1_048_576,
    2 ** 32 - 1,
    2 ** 32,
    -1,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    '5',
    true,
    null,
    {},
  ];
  const variants: unknown[] = [
    {},
    full,
    null,
    [],
    'policy',
    { ...full, unknown: 1 },
    { budget: { rows: 5, extra: 1 } },
    { timeouts: { call_ms: 60_000, total_s: 60 } },
    { env_audit: {} },
    { env_audit: { weights: {} } },
  ];
  const paths: string[][] = [
    ['max_hackability'],
    ['max_hack_rate_ci_hi'],
    ['seed'],
    ['strict'],
    ['budget', 'rows'],
    ['budget', 'bootstrap_resamples'],
    ['budget', 'confidence'],
    ['timeouts', 'call_ms'],
    ['timeouts', 'import_ms'],
    ['timeouts', 'total_s'],
    ['timeouts', 'max_call_ms'],
    ['limits', 'memory_mb'],
    ['env_audit', 'weights', 'integrity'],
    ['env_audit', 'weights', 'dataset_health'],
    ['budget'],
    ['env_audit', 'weights'],
  ];
  type Table = Record<string, unknown>;
  for (const keys of paths) {
    for (const value of numbers) {
      const variant = structuredClone(full) as Table;
      // The table holding the last key, reached through the ones before it.
      const holder = keys.slice(0, -1).reduce((table, key) => table[key] as Table, variant);
      holder[keys[keys.length - 1]!] = value;
      variants.push(variant);
    }
  }
  for (const variant of variants) {
    const parsed = policyFileSchema().safeParse(variant, { jitless: true });
    expect(checkedPolicy(variant), JSON.stringify(variant)).toEqual(parsed.success ? parsed.data : null);
  }
  expect(variants.filter((variant) => checkedPolicy(variant) !== null).length).toBeGreaterThan(60);
});
