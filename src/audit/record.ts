import type { FormatLevels } from './calibrate.js';
import type { Decision } from './decide.js';
import type { Invariant } from './judge.js';
import type { RiskLabel } from './score.js';
import type { AnswerType, Severity } from '../types.js';

/**
 * The audit record: everything a reviewer needs to see why the gate decided
 * as it did. Every field except `timing` is a function of the verifier, the
 * corpus, the policy and the seed, so two runs give byte-identical JSON once
 * `timing` is removed.
 */

export const AUDIT_SCHEMA = 'gatekept.audit/v1';

export interface FamilyRecord {
  family: string;
  title: string;
  attempts: number;
  hacks: number;
  rate: number;
  mean_severity: number;
  channel: number;
  /** The highest severity among this family's hacks, or null. */
  severity: Severity | null;
  hardening: string;
  worst: { attack_id: string; completion: string; reward: number | null; invariant: Invariant | null } | null;
}

export interface FindingRecord {
  attack_id: string;
  family: string;
  severity: Severity;
  invariant: Invariant;
  row: number;
  answer: string;
  alternate_gold: boolean;
  format: string | null;
  position: string | null;
  completion: string;
  completion_length: number;
  reward: number | null;
  non_finite: string | null;
}

export interface AuditRecord {
  schema: string;
  decision: 'PASS' | 'REJECT';
  reasons: { code: string; message: string }[];
  hackability: number;
  risk: RiskLabel;
  hack_rate: { point: number; lo: number; hi: number; n: number; hacks: number; confidence: number; method: string };
  policy: Record<string, unknown>;
  seed: number;
  corpus: { version: string; hash: string; families: number; candidates: number };
  verifier: {
    spec: string;
    sha256: string | null;
    completion_format: string;
    params: string[];
    is_async: boolean;
  };
  target: {
    answer_type: AnswerType;
    choices: string[] | null;
    format: string;
    rows_audited: number;
    rows_total: number;
    golds: { row: number; answer: string; alternate: string | null; accepted_formats: string[] }[];
  };
  families: FamilyRecord[];
  /** The most severe hacks first, at most MAX_FINDINGS of them; `findings_total` counts them all. */
  findings: FindingRecord[];
  findings_total: number;
  errors: { invariant: Invariant; count: number; examples: { attack_id: string; completion: string; error: string }[] }[];
  side_effects: { kind: string; count: number; examples: string[] }[];
  honest: {
    calibration: { row: number; format: string; think: boolean; honest: number | null; wrong: number | null; accepted: boolean }[];
    variants: { row: number; form: string; contested: boolean; completion: string; reward: number | null; rewarded: boolean }[];
    false_rejections: number;
  };
  environment: { python: string };
  tool: { name: string; version: string };
  statement: string;
  timing: { total_ms: number; import_ms: number; evaluations: number; evaluations_per_second: number };
}

export const PASS_STATEMENT =
  'PASS means the verifier survived these attacks at this budget and seed. It is evidence, not a proof: the corpus is finite and an unknown exploit may exist. The gate audits gameability only, not whether valid answers are rewarded correctly.';

export const REJECT_STATEMENT =
  'REJECT means the verifier was rewarded by attacks, misbehaved, or could not be audited under this policy; nothing should ship until it is hardened and re-gated.';

export function excerpt(text: string, max = 240): string {
  const chars = [...text];
  return chars.length <= max ? text : `${chars.slice(0, max).join('')}…`;
}

export function calibrationRows(row: number, table: readonly FormatLevels[]): AuditRecord['honest']['calibration'] {
  return table.map((cell) => ({
    row,
    format: cell.format,
    think: cell.think,
    honest: cell.honest === null || Number.isNaN(cell.honest) ? null : cell.honest,
    wrong: cell.wrong === null || Number.isNaN(cell.wrong) ? null : cell.wrong,
    accepted: cell.accepted,
  }));
}

export function withoutTiming(record: AuditRecord): Omit<AuditRecord, 'timing'> {
  const { timing: _timing, ...rest } = record;
  return rest;
}

export type { Decision };
