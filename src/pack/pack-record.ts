import * as z from 'zod';
import { auditRecordSchema } from '../audit/record.js';
import { ANSWER_FORMATS, SEVERITIES } from '../types.js';

/**
 * The record `pack` writes as gatekept_audit.json: the gate's audit record
 * without its timing (so packing is reproducible), plus what ties it to the
 * packages. One schema, read back by `smoke`; the types are inferred from it.
 */

const smokeProbeSchema = z
  .object({
    kind: z.enum(['honest', 'attack']),
    /** Index into the package's data.jsonl. */
    row: z.number().int().nonnegative(),
    completion: z.string(),
    expected_reward: z.number(),
    attack_id: z.string().optional(),
    severity: z.enum(SEVERITIES).optional(),
  })
  .strict();

const datasetHealthSchema = z
  .object({
    rows: z.number().int(),
    duplicate_questions: z.array(z.object({ question: z.string(), rows: z.array(z.number().int()) }).strict()),
    /** Multiple choice: how often each label is the gold. */
    label_counts: z.record(z.string(), z.number().int()).nullable(),
    /** Rows whose gold, written in the canonical format, the verifier does not reward above a wrong answer. */
    unrewarded_gold_rows: z.array(z.number().int()),
    warnings: z.array(z.string()),
  })
  .strict();

export const packAuditRecordSchema = auditRecordSchema
  .omit({ timing: true })
  .extend({
    seed_file: z.object({ name: z.string(), sha256: z.string() }).strict(),
    package: z
      .object({
        env_id: z.string(),
        verifier_file: z.string(),
        verifier_sha256: z.string(),
        /** The modules written beside the verifier that it imports (file name → sha256): they ran in the audit too. */
        module_sha256: z.record(z.string(), z.string()).optional(),
        verifier_origin: z.enum(['builtin', 'custom']),
        /** How the packaged environment asks for the answer to be written. */
        answer_format: z.enum(ANSWER_FORMATS),
      })
      .strict(),
    dataset_health: datasetHealthSchema,
    /** Completions and the rewards the gate saw, for `gatekept smoke` to replay against the packages. */
    smoke_probes: z.array(smokeProbeSchema),
  })
  .strict();

export type PackAuditRecord = z.infer<typeof packAuditRecordSchema>;
export type SmokeProbeRecord = z.infer<typeof smokeProbeSchema>;
export type DatasetHealth = z.infer<typeof datasetHealthSchema>;
