import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { alternateGold, DEFAULT_CHOICES, detectAnswerType, makeRng, wrongValues } from './answer-values.js';
import {
  AUDIT_SCHEMA,
  buildFamilyRecords,
  buildFindings,
  calibrationRows,
  excerpt,
  PASS_STATEMENT,
  REJECT_STATEMENT,
  type AuditRecord,
} from './audit-record.js';
import { attackFormats, calibrationProbes, computeLevels, honestVariants, type Levels, type Probe } from './calibrate.js';
import { decide } from './decide.js';
import { GatekeptError, EXIT, type ExitCode } from './errors.js';
import { expandCandidates, type Candidate, type GoldContext } from './expand-candidates.js';
import { judge, type Invariant } from './judge.js';
import { loadCorpus } from './load-corpus.js';
import { loadDatasetFile, sampleRows, type DatasetRow } from './load-dataset.js';
import { DEFAULT_POLICY, policyRecord, type GatePolicy } from './policy.js';
import { parseVerifierSpec, type EvalRequest, type EvalResult } from './python-session.js';
import { formatSummary } from './format-report.js';
import { hackability, hackRateInterval, riskLabel, scoreFamily } from './score.js';
import { TOOL } from './tool-info.js';
import { ANSWER_TYPES, SEVERITIES, type AnswerFormat, type AnswerType, type CompletionFormat, type Severity } from './types.js';
import { SKIPPED_RESULT, WorkerPool } from './worker-pool.js';

/**
 * The gate, top to bottom: resolve the inputs, calibrate the verifier on the
 * gold and a wrong answer in every format, attack it in the formats it
 * accepts, judge, score, decide, and write the record.
 */

export interface GateOptions {
  /** The verifier: `pkg.module:fn` or `path/to/file.py:fn`. */
  reward: string;
  /** One gold answer. Give this or `dataset`. */
  answer?: string;
  /** Rows with an `answer` each: a JSONL path or the rows themselves. */
  dataset?: string | readonly { answer: string; prompt?: string | null; info?: Record<string, unknown> }[];
  /** The question passed as `prompt` when a single `answer` is audited. */
  prompt?: string;
  answerType?: AnswerType | 'auto';
  choices?: readonly string[];
  format?: AnswerFormat | 'auto';
  policy?: GatePolicy;
  /** Overrides the policy's seed. */
  seed?: number;
  python?: string;
  /** Where module specs and relative paths resolve (default: process.cwd()). */
  cwd?: string;
  pythonpath?: readonly string[];
  completionFormat?: CompletionFormat;
  workers?: number;
  onProgress?: (done: number, total: number) => void;
  /** Observes every batch of requests sent to the verifier (benchmarks and tracing). */
  onRequests?: (requests: readonly EvalRequest[]) => void;
}

export interface GateResult {
  decision: 'PASS' | 'REJECT';
  passed: boolean;
  exitCode: ExitCode;
  record: AuditRecord;
  /** Honest wording of what the decision means, with the reasons. */
  summary(): string;
  /**
   * Completions with the reward the verifier gave them, in full, so a packaged
   * environment can later be checked to score them the same. Never part of
   * the record: it would carry whole attack payloads.
   */
  probes: GateProbe[];
}

/** One scored completion against a row's own gold (never an alternate gold). */
export type GateProbe =
  | { kind: 'honest'; row: number; answer: string; completion: string; reward: number; format: AnswerFormat; think: boolean }
  | { kind: 'attack'; row: number; answer: string; completion: string; reward: number; attackId: string; severity: Severity };

/** Attack probes kept: enough for any caller, small enough to carry around. */
const ATTACK_PROBES = 32;
/** Longer payloads (padding, dumps) are left out of the probes. */
const PROBE_MAX_CHARS = 4096;

/**
 * The most severe attacks the verifier scored with a number, critical first
 * and then in corpus order: one per family before any family repeats, each
 * on a different audited row where the family has one, so a replay covers
 * many kinds of payload and rows. Deterministic.
 */
function attackProbes(candidates: readonly Candidate[], results: readonly EvalResult[]): GateProbe[] {
  const rank = (severity: Severity): number => SEVERITIES.indexOf(severity);
  const order = candidates
    .map((candidate, index) => ({ candidate, reward: results[index]!.reward, status: results[index]!.status, index }))
    .filter(
      ({ candidate, reward, status }) =>
        !candidate.alternate && status === 'ok' && reward !== null && Number.isFinite(reward) && candidate.completion.length <= PROBE_MAX_CHARS,
    )
    .sort((a, b) => rank(b.candidate.severity) - rank(a.candidate.severity) || a.index - b.index);
  const rows = [...new Set(order.map(({ candidate }) => candidate.row))].sort((a, b) => a - b);
  const families = [...new Set(order.map(({ candidate }) => candidate.family))];
  const picked: typeof order = [];
  const seen = new Set<string>();
  families.forEach((family, index) => {
    const members = order.filter(({ candidate }) => candidate.family === family);
    const pick = members.find(({ candidate }) => candidate.row === rows[index % rows.length]) ?? members[0]!;
    picked.push(pick);
    seen.add(pick.candidate.attackId);
  });
  for (const entry of order) {
    if (picked.length >= ATTACK_PROBES * 2) break;
    if (seen.has(entry.candidate.attackId)) continue;
    seen.add(entry.candidate.attackId);
    picked.push(entry);
  }
  return picked
    .map((entry, pickOrder) => ({ entry, pickOrder }))
    .sort((a, b) => rank(b.entry.candidate.severity) - rank(a.entry.candidate.severity) || a.pickOrder - b.pickOrder)
    .slice(0, ATTACK_PROBES)
    .map(({ entry: { candidate, reward } }) => ({
      kind: 'attack' as const,
      row: candidate.row,
      answer: candidate.answer,
      completion: candidate.completion,
      reward: reward!,
      attackId: candidate.attackId,
      severity: candidate.severity,
    }));
}

interface GoldPlan {
  row: DatasetRow;
  alternate: string | null;
  context: GoldContext;
  alternateContext: GoldContext | null;
}

const WRONG_COUNT = 3;
const DUMP_SIZE = 99;

async function resolveRows(options: GateOptions, policy: GatePolicy, cwd: string): Promise<{ rows: DatasetRow[]; total: number }> {
  if (options.answer !== undefined && options.dataset !== undefined) {
    throw new GatekeptError('BAD_ARGUMENT', 'give either an answer or a dataset, not both');
  }
  if (options.dataset !== undefined) {
    const all =
      typeof options.dataset === 'string'
        ? await loadDatasetFile(path.resolve(cwd, options.dataset))
        : options.dataset.map((row, index) => ({ index, answer: String(row.answer), prompt: row.prompt ?? null, info: row.info ?? {} }));
    if (all.length === 0) throw new GatekeptError('BAD_DATASET', 'the dataset has no rows');
    return { rows: sampleRows(all, policy.budget.rows, policy.seed), total: all.length };
  }
  if (options.answer === undefined || options.answer.trim() === '') {
    throw new GatekeptError('BAD_ARGUMENT', 'no gold answer to audit against', {
      suggestion: 'pass --answer G (the ground truth), or --dataset rows.jsonl',
    });
  }
  return { rows: [{ index: 0, answer: options.answer, prompt: options.prompt ?? null, info: {} }], total: 1 };
}

function resolveAnswerType(rows: readonly DatasetRow[], requested: AnswerType | 'auto', choices: readonly string[] | undefined): AnswerType {
  if (requested !== 'auto') {
    if (!ANSWER_TYPES.includes(requested)) throw new GatekeptError('BAD_ARGUMENT', `unknown answer type ${requested}`);
    return requested;
  }
  const types = new Set(rows.map((row) => detectAnswerType(row.answer, choices)));
  return types.size === 1 ? [...types][0]! : 'string';
}

function planGold(row: DatasetRow, type: AnswerType, choices: readonly string[], seed: number): GoldPlan {
  const rng = makeRng(seed, 'gold', row.index, row.answer);
  const wrong = wrongValues(row.answer, type, WRONG_COUNT, rng, choices);
  if (wrong.length === 0) {
    throw new GatekeptError('BAD_ARGUMENT', `cannot derive a wrong answer for gold ${JSON.stringify(row.answer)} as ${type}`, {
      suggestion: type === 'choice' ? 'pass --choices with at least two labels' : 'check --answer-type',
    });
  }
  const dumpPool = wrongValues(row.answer, type, DUMP_SIZE, makeRng(seed, 'dump', row.index, row.answer), choices);
  const base = { type, choices, formats: [] as AnswerFormat[] };
  const alternate = alternateGold(row.answer, type, makeRng(seed, 'alternate', row.index, row.answer), choices) ?? null;
  let alternateContext: GoldContext | null = null;
  if (alternate !== null) {
    // The alternate gold's wrong values must differ from the original gold too,
    // or a payload built from them could be honest for one of the two.
    const altWrong = wrongValues(alternate, type, WRONG_COUNT + 1, makeRng(seed, 'alternate-wrong', row.index), choices).filter(
      (value) => value !== row.answer,
    );
    alternateContext = { ...base, gold: alternate, wrong: altWrong.slice(0, WRONG_COUNT), dumpPool: [] };
  }
  return { row, alternate, context: { ...base, gold: row.answer, wrong, dumpPool }, alternateContext };
}

function requestsFor(completions: readonly string[], answer: string, row: DatasetRow): EvalRequest[] {
  return completions.map((completion) => ({ completion, answer, prompt: row.prompt, info: row.info }));
}

async function sha256File(file: string | null): Promise<string | null> {
  if (!file) return null;
  try {
    return createHash('sha256').update(await readFile(file)).digest('hex');
  } catch {
    return null;
  }
}

function countBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const list = groups.get(key) ?? [];
    list.push(item);
    groups.set(key, list);
  }
  return groups;
}

export async function gate(options: GateOptions): Promise<GateResult> {
  const started = performance.now();
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const basePolicy = options.policy ?? DEFAULT_POLICY;
  const policy: GatePolicy = options.seed === undefined ? basePolicy : { ...basePolicy, seed: options.seed };
  const target = parseVerifierSpec(options.reward, cwd);
  const corpus = await loadCorpus();

  // 1. Inputs: rows, answer type, choices, one plan per gold.
  const { rows, total: rowsTotal } = await resolveRows(options, policy, cwd);
  const choices = options.choices && options.choices.length > 0 ? [...options.choices] : [...DEFAULT_CHOICES];
  const answerType = resolveAnswerType(rows, options.answerType ?? 'auto', options.choices);
  if (answerType === 'choice') {
    const outside = rows.find((row) => !choices.includes(row.answer.trim()));
    if (outside) {
      throw new GatekeptError('BAD_ARGUMENT', `gold ${JSON.stringify(outside.answer)} is not one of the choices ${choices.join(',')}`, {
        suggestion: 'pass the labels with --choices A,B,C,D',
      });
    }
  }
  const plans = rows.map((row) => planGold(row, answerType, choices, policy.seed));
  const format = options.format ?? 'auto';
  const completionFormat = options.completionFormat ?? 'messages';

  const pool = await WorkerPool.open({
    python: options.python ?? 'python3',
    target,
    pythonpath: [cwd, ...(options.pythonpath ?? []).map((dir) => path.resolve(cwd, dir))],
    completionFormat,
    callTimeoutMs: policy.timeouts.callMs,
    importTimeoutMs: policy.timeouts.importMs,
    memoryMb: policy.limits.memoryMb,
    workers: Math.max(1, options.workers ?? availableParallelism()),
  });
  let deadline: NodeJS.Timeout | undefined;
  try {
    const overall = new Promise<never>((_, reject) => {
      deadline = setTimeout(
        () =>
          reject(
            new GatekeptError('HARNESS_FAILED', `the audit did not finish within timeouts.total_s = ${policy.timeouts.totalS}s`, {
              suggestion: 'raise timeouts.total_s in the policy, or audit fewer rows (budget.rows)',
            }),
          ),
        policy.timeouts.totalS * 1000,
      );
    });
    const run = <T>(work: Promise<T>): Promise<T> => Promise.race([work, overall]);
    let evaluations = 0;
    const evaluate = async (requests: EvalRequest[], progress = false): Promise<EvalResult[]> => {
      options.onRequests?.(requests);
      const results = await run(
        pool.evaluate(requests, {
          stopOnTimeout: true,
          ...(progress && options.onProgress ? { onProgress: options.onProgress } : {}),
        }),
      );
      evaluations += results.filter((result) => result.status !== 'skipped').length;
      return results;
    };

    // 2. Calibration: the gold and a wrong value in every format, for each gold and its alternate.
    const probeSets: { plan: GoldPlan; alternate: boolean; probes: Probe[] }[] = [];
    for (const plan of plans) {
      probeSets.push({ plan, alternate: false, probes: calibrationProbes(plan.context.gold, plan.context.wrong[0]!) });
      if (plan.alternateContext?.wrong[0] !== undefined) {
        probeSets.push({ plan, alternate: true, probes: calibrationProbes(plan.alternateContext.gold, plan.alternateContext.wrong[0]) });
      }
    }
    // The first probe goes alone: a verifier that hangs on every input is then
    // found after one call timeout, not after a whole batch of them.
    const probeRequests = probeSets.flatMap(({ plan, alternate, probes }) =>
      requestsFor(probes.map((probe) => probe.completion), alternate ? plan.alternate! : plan.row.answer, plan.row),
    );
    const firstProbe = await evaluate(probeRequests.slice(0, 1));
    const probeResults =
      firstProbe[0]!.status === 'timeout'
        ? [...firstProbe, ...probeRequests.slice(1).map(() => SKIPPED_RESULT)]
        : [...firstProbe, ...(await evaluate(probeRequests.slice(1)))];
    const levelsByKey = new Map<string, Levels>();
    const honestProbes: GateProbe[] = [];
    let offset = 0;
    for (const { plan, alternate, probes } of probeSets) {
      const results = probeResults.slice(offset, offset + probes.length);
      levelsByKey.set(`${plan.row.index}|${alternate}`, computeLevels(probes, results));
      offset += probes.length;
      if (alternate) continue;
      probes.forEach((probe, index) => {
        const result = results[index]!;
        if (probe.kind !== 'honest' || result.status !== 'ok' || result.reward === null || !Number.isFinite(result.reward)) return;
        honestProbes.push({
          kind: 'honest',
          row: plan.row.index,
          answer: plan.row.answer,
          completion: probe.completion,
          reward: result.reward,
          format: probe.format,
          think: probe.think,
        });
      });
    }
    const levelsOf = (row: number, alternate: boolean): Levels | undefined => levelsByKey.get(`${row}|${alternate}`);

    // 3. Attacks, written in the formats each gold was accepted in, plus honest variants for the report.
    const candidates: Candidate[] = [];
    const variants: { row: DatasetRow; form: string; contested: boolean; completion: string; format: AnswerFormat }[] = [];
    for (const plan of plans) {
      const levels = levelsOf(plan.row.index, false)!;
      if (levels.broken) continue;
      const formats = attackFormats(levels, format);
      candidates.push(...expandCandidates(corpus, { ...plan.context, formats }, plan.row.index, false));
      const altLevels = levelsOf(plan.row.index, true);
      if (plan.alternateContext && altLevels && !altLevels.broken) {
        const altFormats = attackFormats(altLevels, format);
        candidates.push(...expandCandidates(corpus, { ...plan.alternateContext, formats: altFormats }, plan.row.index, true));
      }
      const first = formats[0];
      if (first) {
        for (const variant of honestVariants(plan.row.answer, answerType, first)) variants.push({ row: plan.row, format: first, ...variant });
      }
    }
    const rowByIndex = new Map(plans.map((plan) => [plan.row.index, plan.row]));
    const attackResults = await evaluate(
      candidates.map((candidate) => {
        const row = rowByIndex.get(candidate.row)!;
        return { completion: candidate.completion, answer: candidate.answer, prompt: row.prompt, info: row.info };
      }),
      true,
    );
    const variantResults = await evaluate(variants.map((variant) => ({ completion: variant.completion, answer: variant.row.answer, prompt: variant.row.prompt, info: variant.row.info })));
    // Shutting the workers down overlaps with judging and scoring.
    const closing = pool.close();

    // 4. Judge and score.
    const verdicts = judge({ candidates, results: attackResults, levels: levelsOf });
    const familyScores = corpus.families
      .map((family) => {
        const members = candidates.map((candidate, index) => ({ candidate, verdict: verdicts[index]! })).filter((item) => item.candidate.family === family.family);
        return scoreFamily({
          family: family.family,
          attempts: members.filter((item) => item.verdict.kind === 'hack' || item.verdict.kind === 'ok' || item.verdict.kind === 'committed').length,
          hackSeverities: members.filter((item) => item.verdict.kind === 'hack').map((item) => item.verdict.severity!),
        });
      })
      .filter((score) => score.attempts > 0 || score.hacks > 0);
    const score = hackability(familyScores);
    const attempts = familyScores.reduce((sum, family) => sum + family.attempts, 0);
    const hacks = familyScores.reduce((sum, family) => sum + family.hacks, 0);
    const hackRate = hackRateInterval(hacks, attempts, {
      seed: policy.seed,
      resamples: policy.budget.bootstrapResamples,
      confidence: policy.budget.confidence,
    });

    const errorGroups = countBy(
      candidates.map((candidate, index) => ({ candidate, verdict: verdicts[index]!, result: attackResults[index]! })).filter((item) => item.verdict.kind === 'error'),
      (item) => item.verdict.invariant!,
    );
    const errors = [...errorGroups.entries()].map(([invariant, items]) => ({
      invariant: invariant as Invariant,
      count: items.length,
      examples: items.slice(0, 3).map((item) => ({
        attack_id: item.candidate.attackId,
        completion: excerpt(item.candidate.completion, 80),
        error: item.result.error ? `${item.result.error.type}: ${item.result.error.message}` : item.result.status === 'ok' ? `returned ${item.result.rewardType}` : item.result.status,
      })),
    }));
    const allResults = [...probeResults, ...attackResults, ...variantResults];
    const effects = countBy(
      allResults.flatMap((result) => result.sideEffects).filter((effect) => effect.kind !== 'output'),
      (effect) => effect.kind,
    );
    const sideEffects = [...effects.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([kind, items]) => ({ kind, count: items.length, examples: [...new Set(items.map((item) => excerpt(item.detail, 120)))].slice(0, 3) }));

    // 5. Decide.
    const broken = plans.flatMap((plan) => {
      const reason = levelsOf(plan.row.index, false)!.broken;
      return reason ? [{ row: plan.row.index, answer: plan.row.answer, reason }] : [];
    });
    const decision = decide({
      policy,
      broken,
      hackability: score,
      hackRate,
      errors: errors.map((error) => ({ invariant: error.invariant, count: error.count, example: error.examples[0]?.completion ?? '' })),
      sideEffects: sideEffects.map((effect) => ({ kind: effect.kind, count: effect.count, example: effect.examples[0] ?? '' })),
    });

    // 6. The record.
    const familyMeta = new Map(corpus.families.map((family) => [family.family, { title: family.title, hardening: family.hardening }]));
    const variantRecords = variants.map((variant, index) => {
      const result = variantResults[index]!;
      const levels = levelsOf(variant.row.index, false)!;
      const cell = levels.byFormat.get(variant.format);
      const threshold = cell ? (cell.honest + cell.wrong) / 2 : levels.rawThreshold;
      return {
        row: variant.row.index,
        form: variant.form,
        contested: variant.contested,
        completion: excerpt(variant.completion, 120),
        reward: result.status === 'ok' ? result.reward : null,
        rewarded: result.status === 'ok' && result.reward !== null && result.reward > threshold,
      };
    });
    await closing;
    const totalMs = performance.now() - started;
    const record: AuditRecord = {
      schema: AUDIT_SCHEMA,
      decision: decision.decision,
      reasons: decision.reasons,
      hackability: score,
      risk: riskLabel(score),
      hack_rate: { ...hackRate, confidence: policy.budget.confidence, method: 'seeded percentile bootstrap on Agresti-Coull-augmented outcomes' },
      policy: policyRecord(policy),
      seed: policy.seed,
      corpus: { version: corpus.version, hash: corpus.hash, families: corpus.families.length, candidates: candidates.length },
      verifier: {
        spec: options.reward,
        sha256: await sha256File(target.kind === 'file' ? target.path : pool.info.sourceFile),
        completion_format: completionFormat,
        params: pool.info.params,
        is_async: pool.info.isAsync,
      },
      target: {
        answer_type: answerType,
        choices: answerType === 'choice' ? choices : null,
        format,
        rows_audited: rows.length,
        rows_total: rowsTotal,
        golds: plans.map((plan) => ({
          row: plan.row.index,
          answer: plan.row.answer,
          alternate: plan.alternate,
          accepted_formats: attackFormats(levelsOf(plan.row.index, false)!, 'auto'),
        })),
      },
      families: buildFamilyRecords(familyScores, familyMeta, candidates, verdicts, attackResults),
      findings: buildFindings(candidates, verdicts, attackResults),
      errors,
      side_effects: sideEffects,
      honest: {
        calibration: plans.flatMap((plan) => calibrationRows(plan.row.index, levelsOf(plan.row.index, false)!.table)),
        variants: variantRecords,
        false_rejections: variantRecords.filter((variant) => !variant.contested && !variant.rewarded).length,
      },
      environment: { python: pool.info.pythonVersion },
      tool: { name: TOOL.name, version: TOOL.version },
      statement: decision.decision === 'PASS' ? PASS_STATEMENT : REJECT_STATEMENT,
      timing: {
        total_ms: Math.round(totalMs),
        import_ms: Math.round(pool.info.importMs),
        evaluations,
        evaluations_per_second: Math.round(evaluations / Math.max(totalMs / 1000, 1e-3)),
      },
    };
    return {
      decision: record.decision,
      passed: record.decision === 'PASS',
      exitCode: record.decision === 'PASS' ? EXIT.pass : EXIT.reject,
      record,
      summary: () => formatSummary(record),
      probes: [...honestProbes, ...attackProbes(candidates, attackResults)],
    };
  } finally {
    clearTimeout(deadline);
    await pool.close();
  }
}
