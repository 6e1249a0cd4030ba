import { createHash } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { renderInFormat, wrongValues, makeRng } from '../audit/answer-values.js';
import { PASS_STATEMENT, REJECT_STATEMENT, withoutTiming, type AuditRecord } from '../audit/record.js';
import { ANSWER_TYPE_OF_TASK, buildDataset, choicesOf, type TaskRow } from './build-dataset.js';
import { checkDatasetHealth, type DatasetHealth } from './check-dataset.js';
import { TARGET_DIRS, TARGET_RENDERERS, parseTargets, type EmitTarget } from './emit/targets.js';
import { VERIFIER_FILE_NAME, type EnvironmentSpec } from './environment-spec.js';
import { EXIT, GatekeptError, isGatekeptError, type ExitCode } from '../errors.js';
import { formatSummary } from '../report/scorecard.js';
import { REPORT_FILE_NAME, renderReport } from '../report/render-report.js';
import { gate, type GateProbe } from '../audit/gate.js';
import { loadSeed, type LoadedSeed, type SeedInput } from './seed.js';
import { DEFAULT_POLICY, loadPolicy, type GatePolicy } from '../audit/policy.js';
import type { EvalRequest } from '../runtime/python-session.js';
import { scaffoldVerifier } from './scaffold-verifier.js';
import { checkDestination, commitStaging, createStaging, discardStaging } from './stage-output.js';
import { TOOL } from '../tool-info.js';
import type { AnswerFormat, Severity } from '../types.js';
import { WorkerPool } from '../runtime/worker-pool.js';

/**
 * `gatekeep`: from a seed to gated packages. Build the dataset and the
 * verifier, gate the verifier across the data, check the data's health, and
 * only on PASS render both packages and the audit, then move them into place.
 */

export interface GatekeepOptions {
  /** A seed file path, or the seed itself. */
  seed: string | SeedInput;
  /** A policy, or a path to a policy TOML file (default: the shipped defaults). */
  policy?: GatePolicy | string;
  outDir: string;
  /** Replace a non-empty outDir. */
  force?: boolean;
  /** Also write a zip of the emitted tree. */
  archive?: boolean;
  /** Packages to emit (default: verifiers-v1 and openenv); see `EMIT_TARGETS`. */
  targets?: readonly EmitTarget[];
  python?: string;
  cwd?: string;
  workers?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface PackAuditRecord extends Omit<AuditRecord, 'timing'> {
  seed_file: { name: string; sha256: string };
  package: {
    env_id: string;
    verifier_file: string;
    verifier_sha256: string;
    verifier_origin: 'builtin' | 'custom';
    /** How the packaged environment asks for the answer to be written. */
    answer_format: AnswerFormat;
  };
  dataset_health: DatasetHealth;
  /** Completions and the rewards the gate saw, for `gatekept smoke` to replay against the packages. */
  smoke_probes: SmokeProbeRecord[];
}

export interface SmokeProbeRecord {
  kind: 'honest' | 'attack';
  /** Index into the package's data.jsonl. */
  row: number;
  completion: string;
  expected_reward: number;
  attack_id?: string;
  severity?: Severity;
}

const SMOKE_PROBES = 12;
const SMOKE_HONEST_ROWS = 3;

/**
 * The gold of the first audited rows written the way the package asks for it,
 * then the most severe attacks: a replay of these shows whether the shipped
 * environment scores what the gate saw.
 */
function smokeProbes(probes: readonly GateProbe[], answerFormat: AnswerFormat): SmokeProbeRecord[] {
  const honest: SmokeProbeRecord[] = probes
    .filter((probe) => probe.kind === 'honest' && probe.format === answerFormat && !probe.think)
    .slice(0, SMOKE_HONEST_ROWS)
    .map((probe) => ({ kind: 'honest', row: probe.row, completion: probe.completion, expected_reward: probe.reward }));
  const attacks: SmokeProbeRecord[] = probes
    .flatMap((probe) => (probe.kind === 'attack' ? [probe] : []))
    .slice(0, SMOKE_PROBES - honest.length)
    .map((probe) => ({
      kind: 'attack',
      row: probe.row,
      completion: probe.completion,
      expected_reward: probe.reward,
      attack_id: probe.attackId,
      severity: probe.severity,
    }));
  return [...honest, ...attacks];
}

export interface GatekeepResult {
  emitted: boolean;
  packaged?: {
    root: string;
    /** The verifiers 0.4 package (`verifiers-v1` target), when emitted. */
    verifiers?: string;
    /** The classic verifiers package (`verifiers-v0` target), when emitted. */
    verifiersV0?: string;
    openenv?: string;
    /** Every emitted package by target. */
    targets: Partial<Record<EmitTarget, string>>;
    audit: string;
    report: string;
    archive?: string;
  };
  gate: {
    decision: 'PASS' | 'REJECT';
    passed: boolean;
    record: PackAuditRecord;
    summary(): string;
  };
  exitCode: ExitCode;
  /** Timing of the audit, kept out of the emitted record so packing is reproducible. */
  timing: AuditRecord['timing'];
}

export const AUDIT_FILE_NAME = 'gatekept_audit.json';

/**
 * The gate sees the verifier at its staging path; a user wrote it in the
 * seed. Verifier errors are re-worded to name the seed's fields instead.
 */
async function gateNamingSeed<T>(seed: LoadedSeed['seed'], run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (!isGatekeptError(error) || !error.code.startsWith('VERIFIER_')) throw error;
    const where =
      seed.verifier === 'builtin'
        ? `the built-in ${seed.task} verifier`
        : `verifier.file ${seed.verifier.file} (verifier.function ${seed.verifier.function})`;
    const message = error.message.replace(/\S*\.gatekept-staging-[^\s:'"]*/g, VERIFIER_FILE_NAME);
    throw new GatekeptError(error.code, `${where}: ${message}`, {
      details: error.details.map((line) => line.replace(/\S*\.gatekept-staging-[^\s:'"]*/g, VERIFIER_FILE_NAME)),
      suggestion: seed.verifier === 'builtin' ? (error.suggestion ?? '') : 'fix verifier.file / verifier.function in the seed, or the verifier itself',
      cause: error,
    });
  }
}

interface GoldCheck {
  /** Rows whose gold, in the seed's own format, is not rewarded above a wrong answer. */
  unrewarded: number[];
  /** Per row: the gold written in the seed's format and the reward the verifier gave it. */
  golds: { reply: string; reward: number | null }[];
}

/** Score every row's gold, in the seed's own format, against a wrong answer. */
async function checkGoldRows(
  rows: readonly TaskRow[],
  loaded: LoadedSeed,
  verifierFile: string,
  functionName: string,
  completionFormat: 'messages' | 'string',
  policy: GatePolicy,
  python: string,
  workers: number | undefined,
): Promise<GoldCheck> {
  const { seed } = loaded;
  const type = ANSWER_TYPE_OF_TASK[seed.task];
  const choices = choicesOf(seed);
  const requests: EvalRequest[] = rows.flatMap((row, index) => {
    const wrong = wrongValues(row.answer, type, 1, makeRng(policy.seed, 'health', index), choices)[0] ?? '';
    const base = { answer: row.answer, prompt: row.question, info: row.info ?? {} };
    return [
      { ...base, completion: renderInFormat(seed.answer_format, row.answer) },
      { ...base, completion: renderInFormat(seed.answer_format, wrong) },
    ];
  });
  const pool = await WorkerPool.open({
    python,
    target: { kind: 'file', path: verifierFile, fn: functionName },
    pythonpath: [path.dirname(verifierFile)],
    completionFormat,
    callTimeoutMs: policy.timeouts.callMs,
    importTimeoutMs: policy.timeouts.importMs,
    memoryMb: policy.limits.memoryMb,
    workers: workers ?? 2,
  });
  try {
    const results = await pool.evaluate(requests, { stopOnTimeout: true });
    const unrewarded: number[] = [];
    const golds: GoldCheck['golds'] = [];
    for (let index = 0; index < rows.length; index++) {
      const gold = results[2 * index]!;
      const wrong = results[2 * index + 1]!;
      const ok = gold.status === 'ok' && wrong.status === 'ok' && gold.reward !== null && wrong.reward !== null && gold.reward > wrong.reward;
      if (!ok) unrewarded.push(index);
      golds.push({ reply: requests[2 * index]!.completion, reward: gold.status === 'ok' ? gold.reward : null });
    }
    return { unrewarded, golds };
  } finally {
    await pool.close();
  }
}

async function writeTree(root: string, files: ReadonlyMap<string, string>): Promise<void> {
  for (const [relative, content] of [...files.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    const target = path.join(root, ...relative.split('/'));
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, content);
  }
}

export async function gatekeep(options: GatekeepOptions): Promise<GatekeepResult> {
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const outDir = path.resolve(cwd, options.outDir);
  const force = options.force ?? false;
  const python = options.python ?? 'python3';
  const targets = parseTargets(options.targets);

  // 1. Inputs, checked before any work so a bad --out fails fast.
  const policy =
    options.policy === undefined ? DEFAULT_POLICY : typeof options.policy === 'string' ? await loadPolicy(path.resolve(cwd, options.policy)) : options.policy;
  const loaded = await loadSeed(options.seed, cwd);
  await checkDestination(outDir, force);
  const rows = await buildDataset(loaded);
  const { seed } = loaded;
  const verifier = await scaffoldVerifier(loaded);
  const verifierSha256 = createHash('sha256').update(verifier.source).digest('hex');

  // 2. Everything below happens in staging; nothing reaches outDir unless the gate passes.
  const staging = await createStaging(outDir);
  try {
    const workDir = path.join(staging, '.gate');
    await mkdir(workDir);
    const verifierFile = path.join(workDir, VERIFIER_FILE_NAME);
    await writeFile(verifierFile, verifier.source);

    const result = await gateNamingSeed(seed, () =>
      gate({
        reward: `${verifierFile}:${verifier.functionName}`,
        dataset: rows.map((row) => ({ answer: row.answer, prompt: row.question, info: row.info ?? {} })),
        answerType: ANSWER_TYPE_OF_TASK[seed.task],
        ...(seed.task === 'choice' ? { choices: choicesOf(seed) } : {}),
        format: seed.answer_template ? [seed.answer_template] : 'auto',
        policy,
        python,
        cwd,
        completionFormat: verifier.completionFormat,
        ...(options.workers !== undefined ? { workers: options.workers } : {}),
        ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      }),
    );
    // Every row's gold must be rewarded; a verifier the gate already rejected is not worth the calls.
    const goldCheck: GoldCheck =
      result.decision === 'PASS'
        ? await checkGoldRows(rows, loaded, verifierFile, verifier.functionName, verifier.completionFormat, policy, python, options.workers)
        : { unrewarded: [], golds: [] };
    const { unrewarded } = goldCheck;
    const health = checkDatasetHealth(rows, seed.task === 'choice', unrewarded);

    const reasons = [...result.record.reasons];
    if (unrewarded.length > 0) {
      reasons.push({
        code: 'DATASET_GOLD_UNREWARDED',
        message: `the verifier does not reward the gold of ${unrewarded.length} dataset row(s) written as ${seed.answer_format} (first: row ${unrewarded[0]! + 1}); the environment would punish correct answers`,
      });
    }
    const decision: 'PASS' | 'REJECT' = reasons.length === 0 ? 'PASS' : 'REJECT';
    const record: PackAuditRecord = {
      ...withoutTiming(result.record),
      decision,
      reasons,
      statement: decision === 'PASS' ? PASS_STATEMENT : REJECT_STATEMENT,
      verifier: { ...result.record.verifier, spec: `${VERIFIER_FILE_NAME}:${verifier.functionName}` },
      seed_file: { name: seed.name, sha256: loaded.sha256 },
      package: {
        env_id: seed.name,
        verifier_file: VERIFIER_FILE_NAME,
        verifier_sha256: verifierSha256,
        verifier_origin: verifier.origin,
        answer_format: seed.answer_format,
      },
      dataset_health: health,
      smoke_probes: smokeProbes(result.probes, seed.answer_format),
    };
    const gateView = {
      decision,
      passed: decision === 'PASS',
      record,
      summary: () => formatSummary({ ...record, timing: result.record.timing }),
    };
    if (decision === 'REJECT') {
      await discardStaging(staging);
      return { emitted: false, gate: gateView, exitCode: EXIT.reject, timing: result.record.timing };
    }

    // 3. PASS: render the packages around the exact verifier bytes that were gated.
    const spec: EnvironmentSpec = {
      envId: seed.name,
      description: seed.description,
      systemPrompt: seed.system_prompt,
      answerFormat: seed.answer_format,
      // Each row carries its gold as the gate scored it, so a package can check its ground truth.
      rows: rows.map((row, index) => {
        const gold = goldCheck.golds[index];
        return gold && gold.reward !== null ? { ...row, gold: { reply: gold.reply, reward: gold.reward } } : row;
      }),
      verifierSource: verifier.source,
      verifierFunction: verifier.functionName,
      completionFormat: verifier.completionFormat,
      audit: {
        decision: 'PASS',
        hackability: record.hackability,
        hackRateCiHi: record.hack_rate.hi,
        seed: record.seed,
        corpusVersion: record.corpus.version,
        corpusHash: record.corpus.hash,
        verifierSha256,
      },
      toolVersion: TOOL.version,
    };
    await rm(workDir, { recursive: true, force: true });
    const emitted: Partial<Record<EmitTarget, string>> = {};
    for (const target of targets) {
      await writeTree(path.join(staging, TARGET_DIRS[target], seed.name), TARGET_RENDERERS[target](spec));
      emitted[target] = path.join(outDir, TARGET_DIRS[target], seed.name);
    }
    await writeFile(path.join(staging, AUDIT_FILE_NAME), `${JSON.stringify(record, null, 2)}\n`);
    // The report renders the record just written (no timing), so packing stays reproducible.
    await writeFile(path.join(staging, REPORT_FILE_NAME), renderReport(record, 'html'));
    let archiveName: string | undefined;
    if (options.archive) {
      archiveName = `${seed.name}-gatekept.zip`;
      // The zip writer is loaded only when asked for: it is the heaviest import in the tool.
      const { writeArchive } = await import('./write-archive.js');
      await writeArchive(staging, path.join(staging, archiveName));
    }
    await commitStaging(staging, outDir, force);
    return {
      emitted: true,
      packaged: {
        root: outDir,
        ...(emitted['verifiers-v1'] ? { verifiers: emitted['verifiers-v1'] } : {}),
        ...(emitted['verifiers-v0'] ? { verifiersV0: emitted['verifiers-v0'] } : {}),
        ...(emitted.openenv ? { openenv: emitted.openenv } : {}),
        targets: emitted,
        audit: path.join(outDir, AUDIT_FILE_NAME),
        report: path.join(outDir, REPORT_FILE_NAME),
        ...(archiveName ? { archive: path.join(outDir, archiveName) } : {}),
      },
      gate: gateView,
      exitCode: EXIT.pass,
      timing: result.record.timing,
    };
  } catch (error) {
    await discardStaging(staging);
    throw error;
  }
}
