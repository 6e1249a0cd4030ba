import * as z from 'zod';
import type { AuditRecord } from '../audit/record.js';

/**
 * The environment audit record (`gatekept.env-audit/v1`): one entry per
 * check with its evidence, each reward function's own gate record, and the
 * gate record of the weighted total, which is what the decision rests on.
 * Like the gate's record, it is deterministic apart from the gate records'
 * `timing`.
 */

export const ENV_AUDIT_SCHEMA = 'gatekept.env-audit/v1';

export const CHECK_NAMES = ['integrity', 'reward_design', 'dataset_health', 'contamination', 'reward_distribution'] as const;
export type CheckName = (typeof CHECK_NAMES)[number];

export const CHECK_STATUSES = ['PASS', 'WARN', 'FAIL', 'N/A'] as const;
export type CheckStatus = (typeof CHECK_STATUSES)[number];

export const ENV_KINDS = ['verifiers-v1', 'verifiers-v0', 'openenv'] as const;
export type EnvKind = (typeof ENV_KINDS)[number];

export const checkResultSchema = z.object({
  name: z.enum(CHECK_NAMES),
  status: z.enum(CHECK_STATUSES),
  /** Out of 10; null for N/A. */
  score: z.number().min(0).max(10).nullable(),
  /** One line. */
  justification: z.string(),
  evidence: z.record(z.string(), z.unknown()),
});
export type CheckResult = z.infer<typeof checkResultSchema>;

export interface EnvAuditRecord {
  schema: typeof ENV_AUDIT_SCHEMA;
  decision: 'PASS' | 'REJECT';
  /** 0-10, weighted over the checks that ran. */
  score: number;
  env: { id: string; kind: EnvKind | null; path: string | null; rows_total: number; rows_audited: number };
  checks: CheckResult[];
  /** Each reward function gated on its own (reported, not gated on). */
  rewards: { name: string; weight: number; audit: AuditRecord }[];
  /** The weighted total, the training signal: what reward_design gates on. */
  total: AuditRecord | null;
  policy: Record<string, unknown>;
  seed: number;
  tool: { name: string; version: string };
  statement: string;
}

export const ENV_PASS_STATEMENT =
  'PASS means every check that ran passed or only warned, and the weighted reward survived the attack corpus at this budget and seed through the environment\'s own scoring path. It is evidence, not a proof.';

export const ENV_REJECT_STATEMENT =
  'REJECT means at least one check failed; fix what the failing checks name and audit again before pushing or training.';

/** A check that did not run: no weight in the final score. */
export function notApplicable(name: CheckName, justification: string, evidence: Record<string, unknown> = {}): CheckResult {
  return { name, status: 'N/A', score: null, justification, evidence };
}

/** Status from a score out of 10: the thresholds every check shares. */
export function statusFor(score: number, failed: boolean): CheckStatus {
  if (failed) return 'FAIL';
  return score >= 9.95 ? 'PASS' : 'WARN';
}

export function clampScore(value: number): number {
  return Math.round(Math.min(10, Math.max(0, value)) * 10) / 10;
}
