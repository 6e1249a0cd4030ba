/**
 * `gatekept audit --env` on local copies of public verifiers 0.4 tasksets'
 * shapes, with the real library and no network: a custom answer tag declared
 * with --format (reverse_text) and a reward that checks with math-verify. The
 * shapes that read a Hugging Face cache are in env-audit-offline.test.ts.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { auditEnv } from '../src/env-audit/env-audit.js';
import { AUDIT_TIMEOUT_MS as SLOW, check, ENV_POLICY as POLICY, ENVS, ROWS, V1, WORKERS } from './support/env-audit.js';

describe("the public environments' shapes: verifiers 0.4 tasksets", () => {
  it(
    'a custom answer tag (reverse_text style) passes once its layout is declared with --format',
    async () => {
      const options = { policy: POLICY, env: path.join(ENVS, 'v1-reverse'), python: V1(), rows: ROWS, workers: WORKERS };
      const declared = await auditEnv({ ...options, format: ['<reversed_text>{}</reversed_text>'] });
      expect(check(declared.record, 'reward_design').status).toBe('PASS');
      expect(declared.record.total?.target.golds[0]?.accepted_formats).toEqual(['<reversed_text>{}</reversed_text>']);
      expect(declared.exitCode).toBe(0);
      // Undeclared, the layout is named from the instructions: not audited, not gameable.
      const undeclared = await auditEnv(options);
      expect(check(undeclared.record, 'reward_design')).toMatchObject({
        status: 'NOT_RUN',
        evidence: { suggested_formats: ['<reversed_text>{}</reversed_text>'] },
      });
      expect(check(undeclared.record, 'reward_design').justification).toMatch(/declare the layout with --format '<reversed_text>\{\}<\/reversed_text>'/);
      expect(undeclared.exitCode).toBe(3);
    },
    SLOW,
  );

  it(
    'a 0.4 Taskset whose reward checks with math-verify is judged on what it pays alone',
    async () => {
      const result = await auditEnv({ policy: POLICY, env: path.join(ENVS, 'v1-mathverify'), python: V1(), rows: ROWS, workers: WORKERS });
      // The environment loads and its reward is gated: nothing about pools,
      // timers or imports decides. Plain math-verify reads `72%` as 72 and as
      // 0.72, a re-reading of the one quantity stated: a leniency in the
      // record, which does not reject the ecosystem's standard math reward.
      const total = result.record.total!;
      expect(total.decision, JSON.stringify(total.reasons)).toBe('PASS');
      expect(total.findings_total).toBe(0);
      const reread = total.leniencies!.examples.filter((example) => example.invariant === 're-reading');
      expect(reread.some((example) => example.completion.includes('%') && example.severity === 'low')).toBe(true);
      expect(result.exitCode).toBe(0);
    },
    SLOW,
  );
});
