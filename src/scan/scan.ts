import { existsSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { DEFAULT_CHOICES } from '../audit/answer-values.js';
import { infoUnder } from '../audit/invariance.js';
import { DEFAULT_POLICY, type GatePolicy } from '../audit/policy.js';
import { GatekeptError } from '../errors.js';
import { resolvePython } from '../runtime/resolve-python.js';
import type { RayOptions } from '../runtime/ray/ray-backend.js';
import type { SandboxMode } from '../runtime/sandbox.js';
import type { CallQueue, EvalRequest, EvalResult } from '../calls.js';
import { parseVerifierSpec } from '../runtime/verifier-spec.js';
import { WorkerPool } from '../runtime/worker-pool.js';
import type { AnswerType, CompletionFormat } from '../types.js';
import { asCandidate, firstPass, judgeRollout, uncalibrated, type Judged } from './classify.js';
import { loadReadable, type EnvLoad } from '../env-audit/env-load.js';
import { openEnvScoring, rowPlacer, type EnvRow } from './env-scoring.js';
import { GoldBook } from './gold-book.js';
import { openRollouts, parseFieldMap, type Rollout, type RolloutSource } from './read-rollouts.js';
import { buildScanRecord, brokenGold, type ScanDecision, type ScanRecord } from './scan-record.js';
import { ScanTally } from './tally.js';
import { VerdictFile } from './verdict-file.js';
import type { Levels } from '../audit/calibrate.js';

/**
 * `gatekept scan`, top to bottom: open the verifier's workers and the
 * rollout file; read the rollouts a chunk at a time; for each, plan and
 * calibrate its gold (once per gold), score it under that gold, and settle
 * every rewarded one with the gate's invariance test under alternate golds;
 * tally what each rollout is; then the exploit rate, its interval and the
 * decision. Chunks run a few at a time, so the workers always have calls
 * while one chunk waits for its own, and memory stays bounded.
 */

export interface ScanOptions {
  /** The rollouts: a vf-eval traces.jsonl / results.jsonl, or a plain JSONL. */
  results: string;
  /** The verifier: `pkg.module:fn` or `path/to/file.py:fn`. Give this or `env`. */
  reward?: string;
  /**
   * An environment (a package directory or an installed module name) whose
   * weighted total scores the rollouts, through its own path as `audit --env`
   * gates it. Give this or `reward`.
   */
  env?: string;
  /** With `env`: its rows, when the caller has loaded it already. */
  envRows?: readonly EnvRow[];
  /**
   * With `env` and `envRows`: workers that already score the environment's
   * weighted total (audit --env's, which loaded it): the scan sends its calls
   * there instead of starting workers that load it again, and leaves them running.
   */
  envCalls?: CallQueue;
  /**
   * With `env` and `envRows`, when no `envCalls` are given: how the caller
   * loaded the environment (audit --env's arguments, local datasets, cache).
   * The scan's own workers load it the same way and see what the caller's
   * loader saw: its directory and `pythonpath`, not `cwd`, on the import
   * path, and the paths the load names bound read-only.
   */
  envLoad?: EnvLoad;
  /** `completion=response,answer=ground_truth` mappings for a plain JSONL. */
  fields?: readonly string[];
  answerType?: AnswerType | 'auto';
  choices?: readonly string[];
  policy?: GatePolicy;
  seed?: number;
  python?: string;
  sandbox?: SandboxMode;
  cwd?: string;
  pythonpath?: readonly string[];
  completionFormat?: CompletionFormat;
  workers?: number;
  /** Run the verifier's calls on a Ray cluster's actors (see runtime/ray). */
  ray?: RayOptions;
  /** Told each Ray actor lost during the scan (its calls ran again on another). */
  onActorLost?: (actor: string, reason: string) => void;
  /** Rollouts done, and the total estimated from the bytes read so far. */
  onProgress?: (done: number, total: number) => void;
  /** Every exploit, as it is found (for --emit-attacks). */
  onExploit?: (rollout: Rollout, judged: Judged, type: AnswerType) => void;
  /**
   * A JSONL file to write one line per rollout to, as the scan goes (see
   * verdict-file.ts): in place once the scan ends, absent if it fails.
   */
  verdicts?: string;
}

export interface ScanResult {
  decision: ScanDecision;
  /** As gate's: 0 PASS, 1 REJECT; 3 UNDECIDED, the code for no verdict either way. */
  exitCode: 0 | 1 | 3;
  record: ScanRecord;
  /** Where the verdicts were written, when asked for. */
  verdicts?: string;
}

const EXIT_CODES: Readonly<Record<ScanDecision, ScanResult['exitCode']>> = { PASS: 0, REJECT: 1, UNDECIDED: 3 };

/** Rollouts per chunk, and chunks in flight at once. */
const CHUNK = 256;
const CHUNKS_IN_FLIGHT = 4;

interface Outcome {
  rollout: Rollout;
  judged: Judged;
  reward: number | null;
  error: string | null;
}

function failure(result: EvalResult): string | null {
  if (result.status === 'ok') return result.reward === null && result.nonFinite === null ? `returned ${result.rewardType || 'nothing'}, not a number` : null;
  return result.error ? `${result.status}: ${result.error.type}: ${result.error.message}` : result.status;
}

export async function scan(options: ScanOptions): Promise<ScanResult> {
  const started = performance.now();
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const policy = { ...(options.policy ?? DEFAULT_POLICY), ...(options.seed === undefined ? {} : { seed: options.seed }) };
  const fields = parseFieldMap(options.fields ?? []);
  const choices = options.choices && options.choices.length > 0 ? [...options.choices] : [...DEFAULT_CHOICES];
  if ((options.reward === undefined) === (options.env === undefined)) {
    throw new GatekeptError('BAD_ARGUMENT', 'give exactly one of a verifier (--reward) or an environment (--env) to score the rollouts with', {
      suggestion: 'pass --reward module:fn (or path/to/file.py:fn), or --env with a package directory or module name',
    });
  }
  const source = await openRollouts(path.resolve(cwd, options.results), fields);
  let verdicts: VerdictFile | null = null;
  try {
    verdicts = options.verdicts === undefined ? null : await VerdictFile.open(path.resolve(cwd, options.verdicts));
    const result = await scanSource(source, options, policy, choices, started, cwd, verdicts);
    return verdicts ? { ...result, verdicts: await verdicts.finish() } : result;
  } catch (error) {
    await verdicts?.abort();
    throw error;
  } finally {
    // Open since the check above: closed however the scan ends, read to the end or not.
    await source.close();
  }
}

async function scanSource(
  source: RolloutSource,
  options: ScanOptions,
  policy: GatePolicy,
  choices: readonly string[],
  started: number,
  cwd: string,
  verdicts: VerdictFile | null,
): Promise<ScanResult> {
  const python = resolvePython(options.python, cwd);
  const spec = options.env === undefined ? null : envSpec(options.env, cwd);
  // An environment's directory goes on the import path too, so the sandbox shows it to the workers wherever it lies.
  const envLoad = spec !== null && options.envRows ? (options.envLoad ?? null) : null;
  const pythonpath = [
    ...(envLoad ? [] : [cwd]),
    ...(options.pythonpath ?? []).map((dir) => path.resolve(cwd, dir)),
    ...(spec !== null && path.isAbsolute(spec) ? [spec] : []),
  ];
  // Workers that score the environment already (audit --env's) are used as they are: no shim, no workers of the scan's own.
  const shared = spec !== null && options.envCalls && options.envRows ? options.envCalls : null;
  const scoring =
    spec === null || shared
      ? null
      : await openEnvScoring({
          spec,
          python,
          pythonpath,
          importMs: policy.timeouts.importMs,
          memoryMb: policy.limits.memoryMb,
          ...(options.sandbox ? { sandbox: options.sandbox } : {}),
          ...(options.envRows ? { rows: options.envRows } : {}),
          ...(envLoad ? { load: envLoad } : {}),
        });
  const pool: CallQueue =
    shared ??
    WorkerPool.start({
      python,
      ...(options.sandbox ? { sandbox: options.sandbox } : {}),
      target: parseVerifierSpec(scoring?.reward ?? options.reward!, cwd),
      pythonpath,
      ...(envLoad ? { readable: loadReadable(envLoad) } : {}),
      // The environment's shim takes the completion as text, as audit --env calls it.
      completionFormat: scoring ? 'string' : (options.completionFormat ?? 'messages'),
      callTimeoutMs: policy.timeouts.callMs,
      importTimeoutMs: policy.timeouts.importMs,
      memoryMb: policy.limits.memoryMb,
      workers: Math.max(1, options.workers ?? availableParallelism()),
      ...(options.ray ? { ray: options.ray } : {}),
      ...(options.onActorLost ? { onActorLost: options.onActorLost } : {}),
    });
  let calls = 0;
  const evaluate = async (requests: EvalRequest[]): Promise<EvalResult[]> => {
    if (requests.length === 0) return [];
    calls += requests.length;
    return pool.evaluate(requests);
  };
  const book = new GoldBook({ answerType: options.answerType ?? 'auto', choices, choicesGiven: options.choices !== undefined, seed: policy.seed, evaluate });
  const tally = new ScanTally();
  const broken = new Map<string, Levels['broken']>();
  try {
    // The environment's rows, read while its workers load it.
    const place = shared ? rowPlacer(options.envRows!) : scoring ? await scoring.placer : null;
    await pool.ready;
    // Chunks are judged side by side and committed in file order.
    const running: Promise<Outcome[]>[] = [];
    const commit = async (outcomes: Outcome[]): Promise<void> => {
      for (const outcome of outcomes) {
        tally.add(outcome.rollout, outcome.judged, outcome.reward, outcome.error);
        await verdicts?.write(outcome.rollout, outcome.judged);
        if (outcome.judged.kind === 'exploit') options.onExploit?.(outcome.rollout, outcome.judged, book.typeOf(outcome.rollout.answer));
      }
      // The total is a guess from the share of the file read so far.
      const total = source.read === 0 ? tally.rollouts : Math.max(tally.rollouts, Math.round((tally.rollouts * source.bytes) / source.read));
      options.onProgress?.(tally.rollouts, total);
    };
    let chunk: Rollout[] = [];
    const flush = async (): Promise<void> => {
      const pending = judgeChunk(chunk, book, evaluate, broken);
      pending.catch(() => undefined);
      running.push(pending);
      chunk = [];
      if (running.length >= CHUNKS_IN_FLIGHT) await commit(await running.shift()!);
    };
    for await (const read of source.rollouts) {
      const rollout = place ? place(read) : read;
      if (rollout === null) {
        const unplaced: Judged = { kind: 'error', shape: 'answer', invariant: null, rewardedUnder: [] };
        tally.add(read, unplaced, null, `no row of environment ${options.env} has its prompt and answer`);
        await verdicts?.write(read, unplaced);
        continue;
      }
      chunk.push(rollout);
      if (chunk.length >= CHUNK) await flush();
    }
    if (chunk.length > 0) await flush();
    while (running.length > 0) await commit(await running.shift()!);
    if (tally.rollouts === 0) {
      throw new GatekeptError('BAD_DATASET', `results file ${options.results} holds no rollouts`, {
        suggestion: 'give the JSONL of a run that produced rollouts',
      });
    }
    const record = buildScanRecord({
      file: options.results,
      layout: source.layout ?? 'plain',
      spec: options.env !== undefined ? `${options.env} (weighted total)` : options.reward!,
      isolation: pool.isolation,
      executor: pool.executor?.() ?? null,
      policy,
      tally,
      broken: brokenGold(broken),
      calls,
      golds: book.calibrated,
      totalMs: performance.now() - started,
    });
    return { decision: record.decision, exitCode: EXIT_CODES[record.decision], record };
  } finally {
    await Promise.all([shared ? undefined : pool.close(), scoring?.close()]);
  }
}

/** An environment given as a directory is its absolute path; anything else is a module name or hub id. */
function envSpec(env: string, cwd: string): string {
  const candidate = path.resolve(cwd, env);
  return existsSync(candidate) && statSync(candidate).isDirectory() ? candidate : env;
}

/** Judge one chunk of rollouts: their golds' levels, their rewards, then the invariance test. */
async function judgeChunk(
  rollouts: readonly Rollout[],
  book: GoldBook,
  evaluate: (requests: EvalRequest[]) => Promise<EvalResult[]>,
  broken: Map<string, Levels['broken']>,
): Promise<Outcome[]> {
  const entries = rollouts.map((rollout) => book.get(rollout.answer, rollout));
  const scans = rollouts.map((rollout, index) => asCandidate(rollout.completion, entries[index]!.plan));
  const request = (rollout: Rollout, answer = rollout.answer): EvalRequest => ({
    completion: rollout.completion,
    answer,
    prompt: rollout.prompt,
    info: answer === rollout.answer ? rollout.info : infoUnder(rollout.info, rollout.answer, answer, book.typeOf(rollout.answer), rollout.prompt),
  });
  const [results, levels] = await Promise.all([evaluate(rollouts.map((rollout) => request(rollout))), Promise.all(entries.map((entry) => entry.levels))]);
  const passes = rollouts.map((_, index) => {
    const level = levels[index]!;
    if (level.broken) return null;
    return firstPass(scans[index]!, results[index]!, level, entries[index]!.plan);
  });
  const alternates = await evaluate(rollouts.flatMap((rollout, index) => (passes[index]?.alternates ?? []).map((answer) => request(rollout, answer))));
  let offset = 0;
  return rollouts.map((rollout, index): Outcome => {
    const result = results[index]!;
    const reward = result.status === 'ok' ? result.reward : null;
    const pass = passes[index];
    const level = levels[index]!;
    if (!pass) {
      // A few golds name the fault; the count of failed rollouts is in the tally.
      if (!broken.has(rollout.answer) && broken.size < 100) broken.set(rollout.answer, level.broken);
      return {
        rollout,
        judged: uncalibrated(scans[index]!),
        reward,
        error: `its gold ${JSON.stringify(rollout.answer)} could not be calibrated (${level.broken!.kind})`,
      };
    }
    const outcomes = pass.alternates.map((answer, k) => ({ answer, result: alternates[offset + k]! }));
    offset += pass.alternates.length;
    const judged = judgeRollout(scans[index]!, pass, result, level, entries[index]!.plan, outcomes);
    return {
      rollout,
      judged,
      reward,
      error: judged.kind === 'error' ? (failure(result) ?? failure(outcomes.find(({ result: r }) => r.status !== 'ok')?.result ?? result)) : null,
    };
  });
}
