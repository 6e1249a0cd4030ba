import { readFile } from 'node:fs/promises';
import { sha256File } from '../audit/build-record.js';
import path from 'node:path';
import * as z from 'zod';
import { renderInFormat } from '../audit/answer-values.js';
import { auditRecordSchema, type AuditRecord } from '../audit/record.js';
import { AUDIT_FILE_NAME } from '../pack/pack.js';
import { DATA_FILE_NAME } from '../pack/environment-spec.js';
import { packAuditRecordSchema, type PackAuditRecord } from '../pack/pack-record.js';
import { GatekeptError } from '../errors.js';
import { ANSWER_FORMATS, type AnswerFormat, type Severity } from '../types.js';
import type { DataRow, PackageInfo } from './package.js';
import { brief, type SmokeCheck } from './report.js';

/**
 * The audit smoke replays: the record read and checked, the probes it
 * yields, and the package's files checked against it.
 */

/** For an audit written without smoke_probes: how many attacks and golds to replay. */
const ATTACK_FALLBACK = 9;
const HONEST_FALLBACK = 3;

/**
 * What smoke reads of an audit: the record `pack` wrote beside the packages, or
 * a gate record (`gatekept gate --json`), each checked against its own schema.
 */
const auditSchema = z.union([packAuditRecordSchema, auditRecordSchema]);

export interface Audit {
  target: AuditRecord['target'];
  findings: AuditRecord['findings'];
  honest: AuditRecord['honest'];
  package: PackAuditRecord['package'] | null;
  smoke_probes: PackAuditRecord['smoke_probes'] | null;
}

/** One completion to replay, and the reward the gate gave it. */
export interface Probe {
  kind: 'honest' | 'attack';
  row: number;
  completion: string;
  expected: number;
  attackId: string | null;
  severity: Severity | null;
}

export async function loadAudit(file: string): Promise<Audit> {
  const text = await readFile(file, 'utf8').catch(() => null);
  if (text === null) {
    throw new GatekeptError('FILE_NOT_FOUND', `no audit at ${file}`, {
      suggestion: `keep the package inside the tree \`gatekept pack\` wrote (${AUDIT_FILE_NAME} sits two levels above it), or pass --audit FILE`,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new GatekeptError('BAD_ARGUMENT', `the audit ${file} is not JSON`, { details: [String(error)] });
  }
  const parsed = auditSchema.safeParse(json);
  if (!parsed.success) {
    throw new GatekeptError('BAD_ARGUMENT', `the audit ${file} is not a gatekept audit record`, {
      details: parsed.error.issues.slice(0, 8).map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`),
      suggestion: `pass the ${AUDIT_FILE_NAME} that \`gatekept pack\` wrote with this package`,
    });
  }
  const record = parsed.data;
  return {
    target: record.target,
    findings: record.findings,
    honest: record.honest,
    package: 'package' in record ? record.package : null,
    smoke_probes: 'smoke_probes' in record ? record.smoke_probes : null,
  };
}

async function answerFormatOf(audit: Audit, pkg: PackageInfo): Promise<AnswerFormat | null> {
  if (audit.package?.answer_format) return audit.package.answer_format;
  const source = await readFile(pkg.environmentFile, 'utf8').catch(() => '');
  const stated = /^ANSWER_FORMAT = "(\w+)"$/m.exec(source)?.[1];
  return (ANSWER_FORMATS as readonly string[]).includes(stated ?? '') ? (stated as AnswerFormat) : null;
}

/** A finding's completion is an excerpt; only one that was never cut can be replayed. */
function wholeCompletion(finding: Audit['findings'][number]): boolean {
  if (finding.completion.length !== finding.completion_length) return false;
  return !(finding.completion.endsWith('…') && [...finding.completion].length === 241);
}

/**
 * The probes the pack recorded, or, for an audit written without them, the
 * audited golds in the package's format and the findings kept whole.
 */
export async function probesOf(audit: Audit, pkg: PackageInfo, file: string): Promise<Probe[]> {
  if (audit.smoke_probes) {
    return audit.smoke_probes.map((probe) => ({
      kind: probe.kind,
      row: probe.row,
      completion: probe.completion,
      expected: probe.expected_reward,
      attackId: probe.attack_id ?? null,
      severity: probe.severity ?? null,
    }));
  }
  const probes: Probe[] = [];
  const format = await answerFormatOf(audit, pkg);
  if (format && audit.honest) {
    for (const gold of audit.target.golds) {
      const cell = audit.honest.calibration.find((entry) => entry.row === gold.row && entry.format === format && !entry.think);
      if (cell?.honest === null || cell?.honest === undefined) continue;
      probes.push({ kind: 'honest', row: gold.row, completion: renderInFormat(format, gold.answer), expected: cell.honest, attackId: null, severity: null });
      if (probes.length === HONEST_FALLBACK) break;
    }
  }
  const seen = new Set<string>();
  for (const finding of audit.findings) {
    if (finding.alternate_gold || finding.reward === null || !wholeCompletion(finding) || seen.has(finding.attack_id)) continue;
    seen.add(finding.attack_id);
    probes.push({
      kind: 'attack',
      row: finding.row,
      completion: finding.completion,
      expected: finding.reward,
      attackId: finding.attack_id,
      severity: finding.severity,
    });
    if (seen.size === ATTACK_FALLBACK) break;
  }
  if (probes.length === 0) {
    throw new GatekeptError('BAD_ARGUMENT', `the audit ${file} records nothing to replay`, {
      suggestion: 'pack the seed again with this version of gatekept: it records the probes smoke replays',
    });
  }
  return probes;
}

/** The package's files against the audit: the probed rows hold the audited golds, and the verifier is the audited file. */
export async function checkAgainstAudit(audit: Audit, pkg: PackageInfo, rows: readonly DataRow[], probes: readonly Probe[]): Promise<SmokeCheck[]> {
  const checks: SmokeCheck[] = [];
  const golds = new Map(audit.target.golds.map((gold) => [gold.row, gold.answer]));
  const badRows = [...new Set(probes.map((probe) => probe.row))].filter((row) => golds.has(row) && rows[row]?.answer !== golds.get(row));
  checks.push({
    name: 'gold',
    ok: badRows.length === 0,
    detail:
      badRows.length === 0
        ? `the probed rows of ${DATA_FILE_NAME} hold the audited golds`
        : `rows ${badRows.join(', ')} of ${DATA_FILE_NAME} do not hold the audited gold (row ${badRows[0]}: ${brief(rows[badRows[0]!]?.answer ?? 'missing')}, audited ${brief(golds.get(badRows[0]!))})`,
  });
  if (audit.package?.verifier_sha256) {
    // The verifier and each module it imports from beside it: all of them ran in the audit.
    const audited: [string, string][] = [
      [pkg.verifierFile, audit.package.verifier_sha256],
      ...Object.entries(audit.package.module_sha256 ?? {}).map(([name, digest]): [string, string] => [path.join(path.dirname(pkg.verifierFile), name), digest]),
    ];
    const found = await Promise.all(audited.map(async ([file, digest]) => ({ file, digest, actual: await sha256File(file) })));
    const changed = found.filter((entry) => entry.actual !== entry.digest);
    const first = changed[0];
    checks.push({
      name: 'verifier',
      ok: first === undefined,
      detail:
        first === undefined
          ? `${found.map((entry) => path.relative(pkg.dir, entry.file)).join(', ')} ${found.length === 1 ? 'is the audited file' : 'are the audited files'} (sha256 ${found[0]!.actual!.slice(0, 12)}…)`
          : `${path.relative(pkg.dir, first.file)} is not the audited file (${first.actual === null ? 'missing' : `sha256 ${first.actual.slice(0, 12)}…`}, audited ${first.digest.slice(0, 12)}…)`,
    });
  }
  return checks;
}
