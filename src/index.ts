/** The gatekept library: the same engine the CLI drives. */
export { gate, type GateOptions, type GateResult } from './gate.js';
export { loadPolicy, parsePolicy, parsePolicyToml, DEFAULT_POLICY, type GatePolicy } from './audit/policy.js';
export { GatekeptError, EXIT, type ErrorCode, type ExitCode } from './errors.js';
export { formatScorecard, formatSummary } from './report/scorecard.js';
export {
  renderReport,
  writeReport,
  reportFormatFor,
  REPORT_FILE_NAME,
  REPORT_FORMATS,
  type ReportFormat,
  type ReportRecord,
  type ReportAudit,
  type ReportEnvAudit,
} from './report/render-report.js';
export { showInline, fold, foldedText } from './report/show-text.js';
export { AUDIT_SCHEMA, auditRecordSchema, REASON_CODES, withoutTiming, type AuditRecord, type FindingRecord, type ReasonCode } from './audit/record.js';
export { hackability, hackRateInterval, riskLabel, scoreFamily, type FamilyScore, type HackRate } from './audit/score.js';
export { decide, type Decision, type Reason } from './audit/decide.js';
export { loadCorpus, type Corpus, type Attack, type Family } from './audit/corpus.js';
export type { AnswerFormat, AnswerType, CompletionFormat, Severity } from './types.js';
export { gatekeep, AUDIT_FILE_NAME, type GatekeepOptions, type GatekeepResult, type PackAuditRecord } from './pack/pack.js';
export { EMIT_TARGETS, DEFAULT_EMIT_TARGETS, type EmitTarget } from './pack/emit/targets.js';
export { loadSeed, type Seed, type SeedInput } from './pack/seed.js';
export { smoke, formatSmokeReport, type SmokeOptions, type SmokeReport } from './smoke/smoke.js';
export { auditEnv, type EnvAuditOptions, type EnvAuditResult } from './env-audit/env-audit.js';
export { formatEnvScorecard } from './env-audit/scorecard.js';
export { ENV_AUDIT_SCHEMA, type EnvAuditRecord, type CheckResult, type EnvDecision, type EnvRewardEntry } from './env-audit/record.js';
export { openSandbox, SANDBOX_MODES, type Sandbox, type SandboxMode } from './runtime/sandbox.js';
export { scan, type ScanOptions, type ScanResult } from './scan/scan.js';
export { SCAN_SCHEMA, type ScanRecord } from './scan/scan-record.js';
export { formatScanSummary, renderScanMarkdown, writeScanReport } from './scan/scan-report.js';
export { renderScanHtml } from './scan/scan-html.js';
export { AttackEmitter } from './scan/emit-attacks.js';
export { withAttackFiles, attackProblems } from './audit/attack-files.js';
