import type { SandboxMode } from '../runtime/sandbox.js';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import type { AuditRecord } from '../audit/record.js';
import { DEFAULT_POLICY, policyRecord, type GatePolicy } from '../audit/policy.js';
import { EXIT, GatekeptError, isGatekeptError, type ExitCode } from '../errors.js';
import { TOOL } from '../tool-info.js';
import type { AnswerFormat, AnswerType } from '../types.js';
import { checkContamination } from './checks/contamination.js';
import { checkDatasetHealth } from './checks/dataset-health.js';
import { checkIntegrity } from './checks/integrity.js';
import { checkRewardDesign, promptedFormat } from './checks/reward-design.js';
import { checkRewardDistribution, type ExploitScan } from './checks/reward-distribution.js';
import { gateThroughEnv, type EnvGateRow } from './env-gate.js';
import { loadAgainstFile, loadResultsFile, type AgainstRow } from './input-files.js';
import { inspectEnv, type LoadedEnv } from './inspect-env.js';
import {
  ENV_AUDIT_SCHEMA,
  ENV_PASS_STATEMENT,
  ENV_REJECT_STATEMENT,
  notApplicable,
  type CheckResult,
  type EnvAuditRecord,
} from './record.js';

/**
 * `gatekept audit --env`, top to bottom: read the optional input files, load
 * the environment once (integrity), check its rows (dataset health,
 * contamination), gate its weighted reward and each reward function through
 * its own scoring path (reward design), read the evaluation results (reward
 * distribution), then weigh the checks into a score and a decision.
 */

export interface EnvAuditOptions {
  /** An installed module name (or hub id `owner/name@version`) or a package directory. */
  env: string;
  python?: string;
  /** Isolation of the processes that load the environment and call its rewards (default 'auto', see gate()). */
  sandbox?: SandboxMode;
  /** Extra import directories for the environment (e.g. a `pip install --target` directory). */
  pythonpath?: readonly string[];
  /** Where relative paths resolve (default: process.cwd()). */
  cwd?: string;
  /** Rows gated (overrides the policy's budget.rows). */
  rows?: number;
  /** JSONL question files for the contamination check. */
  against?: readonly string[];
  /** A vf-eval results JSONL for the reward-distribution check. */
  results?: string;
  answerType?: AnswerType | 'auto';
  choices?: readonly string[];
  format?: AnswerFormat | 'auto';
  policy?: GatePolicy;
  seed?: number;
  workers?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface EnvAuditResult {
  decision: 'PASS' | 'REJECT';
  passed: boolean;
  /** 0 PASS, 1 REJECT, 2 when the environment does not load. */
  exitCode: ExitCode;
  record: EnvAuditRecord;
}

/** Time to load the environment outside the gate: the import budget plus building the dataset. */
const LOAD_TIMEOUT_FACTOR = 2;

function resolveSpec(env: string, cwd: string): { spec: string; dir: string | null } {
  const candidate = path.resolve(cwd, env);
  if (existsSync(candidate) && statSync(candidate).isDirectory()) return { spec: candidate, dir: candidate };
  if (env.startsWith('.') || env.startsWith('/') || env.includes(path.sep + path.sep) || existsSync(candidate)) {
    throw new GatekeptError('FILE_NOT_FOUND', `no environment directory at ${candidate}`, {
      suggestion: 'pass a package directory (with pyproject.toml) or an installed module name',
    });
  }
  if (!/^[\w.-]+(\/[\w.-]+)?(@[\w.+-]+)?$/.test(env)) {
    throw new GatekeptError('BAD_ARGUMENT', `${JSON.stringify(env)} is neither a directory nor an environment id`, {
      suggestion: 'pass a package directory, a module name such as my_env, or a hub id owner/name@version',
    });
  }
  return { spec: env, dir: null };
}

function weightedScore(checks: readonly CheckResult[], weights: GatePolicy['envAudit']['weights']): number {
  let sum = 0;
  let weight = 0;
  for (const check of checks) {
    if (check.score === null) continue;
    const w = weights[check.name];
    sum += w * check.score;
    weight += w;
  }
  return weight === 0 ? 0 : Math.round((sum / weight) * 10) / 10;
}

/** How the environment's rewards are called, by the gate and by the scan of --results alike. */
function scoringOptions(options: EnvAuditOptions, policy: GatePolicy, pythonpath: readonly string[]) {
  return {
    python: options.python ?? 'python3',
    ...(options.sandbox ? { sandbox: options.sandbox } : {}),
    pythonpath,
    policy,
    answerType: options.answerType ?? 'auto',
    ...(options.choices ? { choices: options.choices } : {}),
    ...(options.workers !== undefined ? { workers: options.workers } : {}),
  };
}

async function auditRewards(
  options: EnvAuditOptions,
  loaded: LoadedEnv,
  spec: string,
  policy: GatePolicy,
  pythonpath: readonly string[],
): Promise<{ total: AuditRecord | null; rewards: EnvAuditRecord['rewards']; skipped: string | null; refusedOption: boolean }> {
  const rows: EnvGateRow[] = loaded.rows
    .map((row, index) => ({ row: index, answer: row.answer ?? '', prompt: row.prompt }))
    .filter((row) => row.answer.trim() !== '');
  if (rows.length === 0) return { total: null, rewards: [], skipped: 'no row has an answer to gate against', refusedOption: false };
  const scorable = loaded.rewards.filter((reward) => !reward.needs_runtime && !reward.judge && !reward.group && reward.finite_weight);
  if (scorable.length === 0) return { total: null, rewards: [], skipped: 'no reward can be scored offline', refusedOption: false };
  const common = {
    spec,
    rows,
    ...scoringOptions(options, policy, pythonpath),
    format: options.format ?? 'auto',
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
  };
  let total: AuditRecord;
  try {
    total = (await gateThroughEnv({ ...common, reward: null })).record;
  } catch (error) {
    // Bad input about the golds fails the check; machinery failures propagate.
    // It is the user's mistake (exit 2) when the user chose how the golds are
    // read (an --answer-type that does not fit them, say), the environment's
    // otherwise.
    if (isGatekeptError(error) && error.exitCode === EXIT.badInput) {
      const chosen = (options.answerType !== undefined && options.answerType !== 'auto') || options.choices !== undefined || (options.format !== undefined && options.format !== 'auto');
      return { total: null, rewards: [], skipped: error.message, refusedOption: chosen };
    }
    throw error;
  }
  const rewards: EnvAuditRecord['rewards'] = [];
  // With a single reward the total is that reward, weighted: auditing it again would repeat the same calls.
  if (scorable.length > 1) {
    for (const reward of scorable) {
      try {
        const audit = (await gateThroughEnv({ ...common, reward: reward.name })).record;
        rewards.push({ name: reward.name, weight: Number(reward.weight), audit });
      } catch (error) {
        if (!(isGatekeptError(error) && error.exitCode === EXIT.badInput)) throw error;
      }
    }
  } else {
    rewards.push({ name: scorable[0]!.name, weight: Number(scorable[0]!.weight), audit: total });
  }
  return { total, rewards, skipped: null, refusedOption: false };
}

/**
 * The rollouts of `--results` scanned through the environment's own path
 * (`gatekept scan --env`): its exploits are reported beside the reward
 * distribution. A file the scan cannot use is named, not fatal: the
 * distribution check has read it already.
 */
async function scanResults(file: string, options: EnvAuditOptions, loaded: LoadedEnv, spec: string, policy: GatePolicy, pythonpath: readonly string[]): Promise<ExploitScan | string> {
  const { scan } = await import('../scan/scan.js');
  try {
    const { record } = await scan({
      results: file,
      env: spec,
      // Loaded once already: the scan matches rollouts to these rows without loading it again.
      envRows: loaded.rows,
      ...scoringOptions(options, policy, pythonpath),
    });
    const rate = record.exploit_rate;
    return { judged: rate.n, exploits: rate.hacks, point: rate.point, hi: rate.hi, bound: rate.bound, rejected: rate.hi >= rate.bound, lines: record.top.exploit.map((example) => example.line) };
  } catch (error) {
    if (isGatekeptError(error) && error.exitCode === EXIT.badInput) return `not scanned: ${error.message}`;
    throw error;
  }
}

export async function auditEnv(options: EnvAuditOptions): Promise<EnvAuditResult> {
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const basePolicy = options.policy ?? DEFAULT_POLICY;
  let policy: GatePolicy = options.seed === undefined ? basePolicy : { ...basePolicy, seed: options.seed };
  if (options.rows !== undefined) {
    if (!Number.isInteger(options.rows) || options.rows < 1) throw new GatekeptError('BAD_ARGUMENT', `rows must be a whole number of at least 1, not ${options.rows}`);
    policy = { ...policy, budget: { ...policy.budget, rows: options.rows } };
  }
  const { spec, dir } = resolveSpec(options.env, cwd);
  const pythonpath = (options.pythonpath ?? []).map((entry) => path.resolve(cwd, entry));

  // 1. The optional inputs first: a bad file is reported before any Python runs.
  const againstFiles = (options.against ?? []).map((file) => path.resolve(cwd, file));
  let against: AgainstRow[] | null = null;
  if (againstFiles.length > 0) against = (await Promise.all(againstFiles.map((file) => loadAgainstFile(file)))).flat();
  const resultsFile = options.results === undefined ? null : path.resolve(cwd, options.results);
  const results = resultsFile === null ? null : { file: resultsFile, ...(await loadResultsFile(resultsFile)) };

  // 2. Integrity: load it once, offline.
  const inspected = await inspectEnv({
    spec,
    python: options.python ?? 'python3',
    pythonpath,
    timeoutMs: policy.timeouts.importMs * LOAD_TIMEOUT_FACTOR,
    memoryMb: policy.limits.memoryMb,
    ...(options.sandbox ? { sandbox: options.sandbox } : {}),
  });
  const integrity = checkIntegrity(inspected);

  let checks: CheckResult[];
  let total: AuditRecord | null = null;
  let rewards: EnvAuditRecord['rewards'] = [];
  let refusedOption = false;
  if (!inspected.ok) {
    const why = 'not checked: the environment does not load';
    checks = [
      integrity,
      notApplicable('reward_design', why),
      notApplicable('dataset_health', why),
      notApplicable('contamination', against === null ? 'not checked: no --against file given' : why),
      checkRewardDistribution(results),
    ];
  } else {
    // 3. The rows, offline.
    const datasetHealth = checkDatasetHealth(inspected.rows, options.answerType ?? 'auto');
    const contamination = checkContamination(inspected.rows.map((row) => row.prompt), against, againstFiles);
    // 4. The gate, through the environment's own scoring path.
    const gated = await auditRewards(options, inspected, spec, policy, pythonpath);
    total = gated.total;
    rewards = gated.rewards;
    refusedOption = gated.refusedOption;
    const instructions = inspected.system_prompt ?? inspected.rows.find((row) => row.prompt)?.prompt ?? null;
    const rewardDesign = checkRewardDesign(total, rewards, gated.skipped, promptedFormat(instructions));
    const scanned = resultsFile === null ? null : await scanResults(resultsFile, options, inspected, spec, policy, pythonpath);
    checks = [integrity, rewardDesign, datasetHealth, contamination, checkRewardDistribution(results, inspected.kind, scanned)];
  }

  // 5. Score and decide: any FAIL rejects.
  const score = weightedScore(checks, policy.envAudit.weights);
  const decision = checks.some((check) => check.status === 'FAIL') ? 'REJECT' : 'PASS';
  const record: EnvAuditRecord = {
    schema: ENV_AUDIT_SCHEMA,
    decision,
    score,
    env: {
      id: inspected.ok ? inspected.module : path.basename(spec),
      kind: inspected.ok ? inspected.kind : (inspected.kind ?? null),
      path: dir,
      rows_total: inspected.ok ? inspected.rows.length : 0,
      rows_audited: total?.target.rows_audited ?? 0,
    },
    checks,
    rewards,
    total,
    policy: { ...policyRecord(policy), env_audit: { weights: { ...policy.envAudit.weights } } },
    seed: policy.seed,
    tool: { name: TOOL.name, version: TOOL.version },
    statement: decision === 'PASS' ? ENV_PASS_STATEMENT : ENV_REJECT_STATEMENT,
  };
  const exitCode: ExitCode = !inspected.ok || refusedOption ? EXIT.badInput : decision === 'PASS' ? EXIT.pass : EXIT.reject;
  return { decision, passed: decision === 'PASS', exitCode, record };
}
