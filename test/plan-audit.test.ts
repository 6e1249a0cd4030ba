/**
 * The plan tells how many rows it audits as soon as they are read, before
 * the per-row planning, so that the gate can start the workers they need
 * while the rows are planned.
 */
import { expect, it } from 'vitest';
import { buildAnswerPool } from '../src/audit/answer-pool.js';
import { isNearValue } from '../src/audit/commit-baselines.js';
import { planAudit, planGold } from '../src/audit/plan-audit.js';
import { DEFAULT_POLICY } from '../src/audit/policy.js';

it('reports the sampled rows once, before the plan is ready, and as many as it plans', async () => {
  const dataset = Array.from({ length: 20 }, (_, index) => ({ answer: String(100 + index) }));
  const policy = { ...DEFAULT_POLICY, budget: { ...DEFAULT_POLICY.budget, rows: 12 } };
  const heard: number[] = [];
  let planned = false;
  const planning = planAudit({ dataset }, policy, process.cwd(), (rows) => {
    expect(planned).toBe(false);
    heard.push(rows);
  }).then((plan) => {
    planned = true;
    return plan;
  });
  const plan = await planning;
  expect(heard).toEqual([12]);
  expect(plan.plans).toHaveLength(12);
});

it('reports nothing when the input is refused before any row is read', async () => {
  const heard: number[] = [];
  await expect(planAudit({ answer: '42', dataset: [{ answer: '1' }] }, DEFAULT_POLICY, process.cwd(), (rows) => heard.push(rows))).rejects.toThrow(/not both/);
  expect(heard).toEqual([]);
});

it('names every label to pass when a gold is not one of the choices', async () => {
  const refused = planAudit({ dataset: [{ answer: 'B' }, { answer: 'E' }, { answer: 'F' }], answerType: 'choice' }, DEFAULT_POLICY, process.cwd());
  await expect(refused).rejects.toMatchObject({ suggestion: 'pass every label with --choices, for example --choices A,B,C,D,E,F' });
});

it("never takes calibration's plainly wrong number within a tenth of the gold, drawn or another row's", () => {
  // Such a value is one a tolerance pays (mean relative accuracy pays 185 under 180), and the reward would read as format-only.
  const golds = ['185', '2.4', '17', '1000', '-42', '0.75', '$1,200', '63%'];
  for (const gold of golds) {
    for (let seed = 1; seed <= 60; seed++) {
      const row = { index: 0, answer: gold, prompt: null, info: {} };
      const wrong = planGold(row, 'numeric', [], seed).context.wrong[0]!;
      expect(isNearValue(wrong, gold, 'numeric'), `${wrong} for ${gold}, seed ${seed}`).toBe(false);
    }
  }
  // Another row's answer near the gold is passed over for one apart from it.
  const pool = buildAnswerPool(['180', '190', '40', '400'], 'numeric', 1)!;
  const fromRows = planGold({ index: 0, answer: '185', prompt: null, info: {} }, 'numeric', [], 1, pool).context.wrong[0]!;
  expect(['40', '400']).toContain(fromRows);
});
