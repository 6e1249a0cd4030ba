/**
 * The plan tells how many rows it audits as soon as they are read, before
 * the per-row planning, so that the gate can start the workers they need
 * while the rows are planned.
 */
import { expect, it } from 'vitest';
import { planAudit } from '../src/audit/plan-audit.js';
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
