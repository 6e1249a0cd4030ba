/**
 * `audit --env` scores each candidate once and reads every reward from that
 * call: a rubric of four rewards (test/fixtures/envs/v0-four-rewards, real
 * verifiers 0.3.1 in its test venv) is audited with the calls of the total's
 * gate and a few more, one fresh process, and the same per-reward records as
 * gating each reward with calls of its own.
 */
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { withoutTiming } from '../src/audit/record.js';
import { auditEnv } from '../src/env-audit/env-audit.js';
import { openEnvGates } from '../src/env-audit/env-gate.js';
import type { EnvLoad } from '../src/env-audit/env-load.js';
import { inspectEnv } from '../src/env-audit/inspect-env.js';
import { AUDIT_TIMEOUT_MS, ENV_POLICY as POLICY, ENVS, ROWS, V0, WORKERS } from './support/env-audit.js';

vi.setConfig({ testTimeout: AUDIT_TIMEOUT_MS });

const ENV = path.join(ENVS, 'v0-four-rewards');
const REWARDS = ['correct', 'formatted', 'numeric_box', 'concise'];

describe('four rewards scored once', () => {
  it("reads each reward's verdict from the total's calls, with the records of gating each on its own", async () => {
    const result = await auditEnv({ policy: POLICY, env: ENV, python: V0(), rows: ROWS, workers: WORKERS });
    const { record } = result;
    expect(record.rewards.map((entry) => [entry.name, entry.status])).toEqual(REWARDS.map((name) => [name, 'AUDITED']));
    const timing = record.timing!;
    expect(timing).toBeDefined();
    // One fresh process for every re-check, where each reward's gate used to start its own.
    expect(timing.fresh_processes).toBe(1);
    const gated = [record.total!, ...record.rewards.map((entry) => entry.audit!)];
    const evaluations = gated.map((audit) => audit.timing.evaluations);
    // Every gate made its calls, and the workers scored little more than the total's gate alone.
    expect(timing.calls_scored + timing.calls_read).toBeGreaterThanOrEqual(
      evaluations.reduce((sum, count) => sum + count, 0) - timing.fresh_calls_scored - timing.fresh_calls_read,
    );
    expect(timing.calls_read).toBeGreaterThan(0);
    expect(timing.calls_scored).toBeLessThan(evaluations[0]! * 1.5);

    // The same rewards, each gated with calls of its own (the requests ask for it alone).
    const policy = { ...POLICY, budget: { ...POLICY.budget, rows: ROWS } };
    const load: EnvLoad = { envArgs: {}, datasets: {}, hf: { datasets: null, hub: null } };
    const inspected = await inspectEnv({
      load,
      spec: ENV,
      python: V0(),
      pythonpath: [],
      timeoutMs: POLICY.timeouts.importMs,
      memoryMb: POLICY.limits.memoryMb,
    });
    if (!inspected.ok) throw new Error('the fixture does not load');
    const rows = inspected.rows.map((row, index) => ({ row: index, answer: row.answer ?? '', prompt: row.prompt })).filter((row) => row.answer !== '');
    const gates = await openEnvGates({ spec: ENV, rows, python: V0(), pythonpath: [], policy, answerType: 'auto', format: 'auto', workers: WORKERS, load });
    try {
      for (const [index, name] of REWARDS.entries()) {
        const alone = (await gates.gate(name)).record;
        expect(withoutTiming(alone), name).toEqual(withoutTiming(record.rewards[index]!.audit!));
      }
      expect(gates.counts.read).toBe(0);
    } finally {
      await gates.close();
    }
  });
});
