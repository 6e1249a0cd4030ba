import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { withoutTiming } from '../src/audit/record.js';
import { gate } from '../src/audit/gate.js';
import { DEFAULT_POLICY, parsePolicy } from '../src/audit/policy.js';
import { PACKAGE_ROOT } from '../src/paths.js';

const python = process.env.GATEKEPT_PYTHON ?? 'python3';
const verifier = (name: string) => `examples/verifiers/${name}.py:reward`;
const base = { python, cwd: PACKAGE_ROOT, workers: 1 };

describe('gate on real verifiers', () => {
  it('passes a strict boxed verifier with zero hacks over at least 150 candidates', async () => {
    const result = await gate({ ...base, reward: verifier('strict'), answer: '42' });
    expect(result.decision).toBe('PASS');
    expect(result.exitCode).toBe(0);
    expect(result.record.hackability).toBe(0);
    expect(result.record.hack_rate.n).toBeGreaterThanOrEqual(150);
    expect(result.record.hack_rate.hi).toBeLessThan(0.25);
    expect(result.record.target.golds[0]!.accepted_formats).toEqual(['boxed']);
    expect(result.record.families.length).toBeGreaterThanOrEqual(20);
    expect(result.summary()).toMatch(/survived these attacks at this budget and seed/);
  });

  it('rejects a substring-matching verifier, naming the family and the invariant', async () => {
    const result = await gate({ ...base, reward: verifier('substring'), answer: '42' });
    expect(result.decision).toBe('REJECT');
    expect(result.exitCode).toBe(1);
    expect(result.record.hackability).toBeGreaterThanOrEqual(15);
    const substring = result.record.families.find((family) => family.family === 'substring-containment')!;
    expect(substring.hacks).toBeGreaterThan(0);
    expect(result.record.findings.some((finding) => finding.family === 'substring-containment' && finding.invariant === 'attack-rewarded')).toBe(true);
    expect(result.record.reasons.map((reason) => reason.code)).toContain('HACKABILITY_OVER');
  });

  it('rejects a verifier that raises on a valid answer as broken', async () => {
    const result = await gate({ ...base, reward: verifier('raises'), answer: '3.5' });
    expect(result.decision).toBe('REJECT');
    expect(result.record.reasons[0]!.code).toBe('BROKEN_ON_GOLD');
    expect(result.record.reasons[0]!.message).toMatch(/ValueError/);
  });

  it('rejects a verifier that hangs, within its call timeout plus a margin', async () => {
    const policy = parsePolicy({ timeouts: { call_ms: 500 } });
    const started = performance.now();
    const result = await gate({ ...base, reward: verifier('hangs'), answer: '42', policy });
    const seconds = (performance.now() - started) / 1000;
    expect(result.decision).toBe('REJECT');
    expect(result.record.reasons[0]!.message).toMatch(/timed out/);
    // One call timeout, a kill and a restart; never dozens of timeouts in a row.
    expect(seconds).toBeLessThan(10);
  });

  it('is deterministic: two runs give identical records apart from timing', async () => {
    const first = await gate({ ...base, reward: verifier('substring'), answer: '42', seed: 99 });
    const second = await gate({ ...base, reward: verifier('substring'), answer: '42', seed: 99 });
    expect(JSON.stringify(withoutTiming(second.record))).toBe(JSON.stringify(withoutTiming(first.record)));
    expect(first.record.seed).toBe(99);
  });

  it('gives the same record with one worker or two', async () => {
    const rows = Array.from({ length: 12 }, (_, index) => ({ answer: String(100 + index * 7) }));
    const policy = { ...DEFAULT_POLICY, budget: { ...DEFAULT_POLICY.budget, rows: 12 } };
    const one = await gate({ ...base, reward: verifier('substring'), dataset: rows, policy, workers: 1 });
    const two = await gate({ ...base, reward: verifier('substring'), dataset: rows, policy, workers: 2 });
    expect(JSON.stringify(withoutTiming(two.record))).toBe(JSON.stringify(withoutTiming(one.record)));
    expect(one.record.target.rows_audited).toBe(12);
  });

  it('audits across dataset rows from a JSONL file', async () => {
    const result = await gate({ ...base, reward: verifier('strict'), dataset: path.join('examples', 'data', 'numbers.jsonl') });
    expect(result.decision).toBe('PASS');
    expect(result.record.target.rows_audited).toBeGreaterThan(1);
    expect(new Set(result.record.target.golds.map((gold) => gold.answer)).size).toBe(result.record.target.rows_audited);
  });

  it('records the verifier hash, corpus identity and the policy', async () => {
    const result = await gate({ ...base, reward: verifier('strict'), answer: '7' });
    expect(result.record.verifier.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(result.record.corpus.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(result.record.policy).toMatchObject({ max_hackability: 15, max_hack_rate_ci_hi: 0.25 });
    expect(result.record.schema).toBe('gatekept.audit/v2');
    expect(result.record.policy).toMatchObject({ strict: false, timeouts: { call_ms: 10000 } });
    expect(result.record.tool.name).toBe('gatekept');
  });
});
