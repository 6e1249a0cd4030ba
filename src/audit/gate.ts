import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { alternateGold, DEFAULT_CHOICES, detectAnswerType, isNumeric, makeRng, wrongValues } from './answer-values.js';
import { AUDIT_SCHEMA, calibrationRows, excerpt, PASS_STATEMENT, REJECT_STATEMENT, type AuditRecord } from './record.js';
import { attackFormats, calibrationProbes, computeLevels, honestVariants, type Levels, type Probe } from './calibrate.js';
import { collectGarbageIfGrown } from './collect-garbage.js';
import { decide } from './decide.js';
import { GatekeptError, EXIT, type ExitCode } from '../errors.js';
import { expandCandidates, type Candidate, type GoldContext } from './expand-candidates.js';
import { OutcomeTally, type GateProbe } from './tally-outcomes.js';
import { judge } from './judge.js';
import { loadCorpus } from './corpus.js';
import { loadDatasetFile, sampleRows, type DatasetRow } from './gold-dataset.js';
import { DEFAULT_POLICY, policyRecord, type GatePolicy } from './policy.js';
import { resolvePython } from '../runtime/resolve-python.js';
import type { SandboxMode } from '../runtime/sandbox.js';
import { parseVerifierSpec, type EvalRequest, type EvalResult } from '../runtime/python-session.js';
import { formatSummary } from '../report/scorecard.js';
import { hackability, hackRateInterval, riskLabel } from './score.js';
import { TOOL } from '../tool-info.js';
import { ANSWER_TYPES, type AnswerFormat, type AnswerType, type CompletionFormat } from '../types.js';
import { WorkerPool } from '../runtime/worker-pool.js';
import { evaluateShuffled, RescoreSample } from './rescore.js';

/**
 * The gate, top to bottom: resolve the inputs, calibrate the verifier on the
 * gold and a wrong answer in every format, attack it in the formats it
 * accepts, judge, score, decide, and write the record. Rows stream through
 * in chunks so memory stays flat however large the audit.
 */

export type { GateProbe } from './tally-outcomes.js';

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
  /** Isolation of the verifier's processes: 'auto' (default; bubblewrap when available), 'bwrap' (required) or 'none'. */
  sandbox?: SandboxMode;
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
    // An explicit type must fit every gold, or the wrong values and attacks built from it would be nonsense.
    const misfit = rows.find(
      (row) =>
        (requested === 'numeric' && !isNumeric(row.answer)) ||
        (requested === 'boolean' && detectAnswerType(row.answer, undefined) !== 'boolean'),
    );
    if (misfit) {
      throw new GatekeptError('BAD_ARGUMENT', `gold ${JSON.stringify(misfit.answer)}${misfit.index > 0 ? ` (row ${misfit.index + 1})` : ''} is not a ${requested} answer`, {
        suggestion: requested === 'numeric' ? 'give a number such as 42 or -3.5, or use --answer-type string' : 'give true/false (or yes/no), or use --answer-type string',
      });
    }
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


/** Rows calibrated, attacked and judged together; bounds what is held in memory at once. */
const ROWS_PER_CHUNK = 16;

interface VariantRecord {
  row: number;
  form: string;
  contested: boolean;
  completion: string;
  reward: number | null;
  rewarded: boolean;
}

/** 1. Inputs: rows, answer type, choices, one plan per gold. */
async function planAudit(options: GateOptions, policy: GatePolicy, cwd: string) {
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
  return { rows, rowsTotal, choices, answerType, plans };
}

export async function gate(options: GateOptions): Promise<GateResult> {
  const started = performance.now();
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const basePolicy = options.policy ?? DEFAULT_POLICY;
  if (options.seed !== undefined && !(Number.isInteger(options.seed) && options.seed >= 0 && options.seed <= 0xffff_ffff)) {
    throw new GatekeptError('BAD_ARGUMENT', `seed ${String(options.seed)} is not a whole number from 0 to 4294967295`);
  }
  const policy: GatePolicy = options.seed === undefined ? basePolicy : { ...basePolicy, seed: options.seed };
  const target = parseVerifierSpec(options.reward, cwd);
  const completionFormat = options.completionFormat ?? 'messages';
  // Python starts (and imports the verifier) while the inputs are read and planned.
  const poolOpening = WorkerPool.open({
    python: resolvePython(options.python, cwd),
    ...(options.sandbox ? { sandbox: options.sandbox } : {}),
    target,
    pythonpath: [cwd, ...(options.pythonpath ?? []).map((dir) => path.resolve(cwd, dir))],
    completionFormat,
    callTimeoutMs: policy.timeouts.callMs,
    importTimeoutMs: policy.timeouts.importMs,
    memoryMb: policy.limits.memoryMb,
    workers: Math.max(1, options.workers ?? availableParallelism()),
  });
  // Until it is awaited, a failure to open is held here instead of being unhandled.
  poolOpening.catch(() => undefined);
  let corpus: Awaited<ReturnType<typeof loadCorpus>>;
  let planned: Awaited<ReturnType<typeof planAudit>>;
  try {
    corpus = await loadCorpus();
    planned = await planAudit(options, policy, cwd);
  } catch (error) {
    void poolOpening.then((opened) => opened.close(), () => undefined);
    throw error;
  }
  const { rowsTotal, choices, answerType, plans } = planned;

  const format = options.format ?? 'auto';

  const pool = await poolOpening;
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
    let evaluations = 0;
    let batches = 0;
    const rescore = new RescoreSample(policy.seed);
    let expectedTotal = 0;
    let progressDone = 0;
    const evaluate = async (requests: EvalRequest[], progress = false, blocks?: number[]): Promise<EvalResult[]> => {
      options.onRequests?.(requests);
      const onProgress = progress && options.onProgress ? options.onProgress : undefined;
      const before = progressDone;
      batches += 1;
      const results = await evaluateShuffled(requests, policy.seed, batches, (shuffled) =>
        Promise.race([
          pool.evaluate(shuffled, {
            stopOnTimeout: true,
            ...(onProgress ? { onProgress: (done: number) => onProgress(before + done, Math.max(expectedTotal, before + shuffled.length)) } : {}),
          }),
          overall,
        ]),
        blocks,
      );
      rescore.add(requests, results);
      if (progress) progressDone += requests.length;
      evaluations += results.filter((result) => result.status !== 'skipped').length;
      return results;
    };

    const tally = new OutcomeTally(corpus.families.map((family) => family.family));
    const acceptedByRow = new Map<number, AnswerFormat[]>();
    const calibration: AuditRecord['honest']['calibration'] = [];
    const variantRecords: VariantRecord[] = [];
    const honestProbes: GateProbe[] = [];
    const broken: { row: number; answer: string; reason: NonNullable<Levels['broken']> }[] = [];
    let candidateCount = 0;
    let rowsAudited = 0;

    for (let start = 0; start < plans.length && !tally.timedOut; start += ROWS_PER_CHUNK) {
      const chunk = plans.slice(start, start + ROWS_PER_CHUNK);

      // 2. Calibration: the gold and a wrong value in every format, for each gold and its alternate.
      const probeSets: { plan: GoldPlan; alternate: boolean; probes: Probe[] }[] = [];
      for (const plan of chunk) {
        probeSets.push({ plan, alternate: false, probes: calibrationProbes(plan.context.gold, plan.context.wrong[0]!) });
        if (plan.alternateContext?.wrong[0] !== undefined) {
          probeSets.push({ plan, alternate: true, probes: calibrationProbes(plan.alternateContext.gold, plan.alternateContext.wrong[0]) });
        }
      }
      const probeRequests = probeSets.flatMap(({ plan, alternate, probes }) =>
        requestsFor(probes.map((probe) => probe.completion), alternate ? plan.alternate! : plan.row.answer, plan.row),
      );
      // A verifier that hangs costs one call timeout here: evaluation stops at the first one.
      const probeResults = await evaluate(
        probeRequests,
        false,
        probeSets.map(({ probes }) => probes.length),
      );
      tally.addSideEffects(probeResults);
      const chunkLevels = new Map<string, Levels>();
      let offset = 0;
      for (const { plan, alternate, probes } of probeSets) {
        const results = probeResults.slice(offset, offset + probes.length);
        offset += probes.length;
        const levels = computeLevels(probes, results);
        chunkLevels.set(`${plan.row.index}|${alternate}`, levels);
        if (alternate) continue;
        acceptedByRow.set(plan.row.index, attackFormats(levels, 'auto'));
        calibration.push(...calibrationRows(plan.row.index, levels.table));
        if (levels.broken) broken.push({ row: plan.row.index, answer: plan.row.answer, reason: levels.broken });
        probes.forEach((probe, index) => {
          const result = results[index]!;
          if (probe.kind !== 'honest' || result.status !== 'ok' || result.reward === null || !Number.isFinite(result.reward)) return;
          honestProbes.push({ kind: 'honest', row: plan.row.index, answer: plan.row.answer, completion: probe.completion, reward: result.reward, format: probe.format, think: probe.think });
        });
      }
      const levelsOf = (row: number, alternate: boolean): Levels | undefined => chunkLevels.get(`${row}|${alternate}`);
      if (tally.timedOut) {
        rowsAudited += chunk.length;
        break;
      }

      // 3. Attacks, written in the formats each gold was accepted in, plus honest variants for the report.
      const candidates: Candidate[] = [];
      const variants: { row: DatasetRow; form: string; contested: boolean; completion: string; format: AnswerFormat }[] = [];
      for (const plan of chunk) {
        const levels = levelsOf(plan.row.index, false)!;
        if (levels.broken) continue;
        const formats = attackFormats(levels, format);
        candidates.push(...expandCandidates(corpus, { ...plan.context, formats }, plan.row.index, false));
        const altLevels = levelsOf(plan.row.index, true);
        if (plan.alternateContext && altLevels && !altLevels.broken) {
          candidates.push(...expandCandidates(corpus, { ...plan.alternateContext, formats: attackFormats(altLevels, format) }, plan.row.index, true));
        }
        const firstFormat = formats[0];
        if (firstFormat) {
          for (const variant of honestVariants(plan.row.answer, answerType, firstFormat)) variants.push({ row: plan.row, format: firstFormat, ...variant });
        }
      }
      candidateCount += candidates.length;
      // Progress and the number of workers are estimated from the chunks seen so far: rows are alike in size.
      expectedTotal = Math.round((candidateCount / (start + chunk.length)) * plans.length);
      await pool.reserve(expectedTotal - start);
      const rowByIndex = new Map(chunk.map((plan) => [plan.row.index, plan.row]));
      // Attacks and honest variants go out together: one round of batches, no idle worker between them.
      const combined = await evaluate(
        [
          ...candidates.map((candidate) => {
            const row = rowByIndex.get(candidate.row)!;
            return { completion: candidate.completion, answer: candidate.answer, prompt: row.prompt, info: row.info };
          }),
          ...variants.map((variant) => ({ completion: variant.completion, answer: variant.row.answer, prompt: variant.row.prompt, info: variant.row.info })),
        ],
        true,
      );
      const attackResults = combined.slice(0, candidates.length);
      const variantResults = combined.slice(candidates.length);

      // 4. Judge this chunk and fold it into the tally.
      tally.addJudged(candidates, judge({ candidates, results: attackResults, levels: levelsOf }), attackResults);
      tally.addSideEffects(variantResults);
      variants.forEach((variant, index) => {
        const result = variantResults[index]!;
        const levels = levelsOf(variant.row.index, false)!;
        const cell = levels.byFormat.get(variant.format);
        const threshold = cell ? (cell.honest + cell.wrong) / 2 : levels.rawThreshold;
        variantRecords.push({
          row: variant.row.index,
          form: variant.form,
          contested: variant.contested,
          completion: excerpt(variant.completion, 120),
          reward: result.status === 'ok' ? result.reward : null,
          rewarded: result.status === 'ok' && result.reward !== null && result.reward > threshold,
        });
      });
      rowsAudited += chunk.length;
      if (start + ROWS_PER_CHUNK < plans.length) collectGarbageIfGrown();
    }
    const recheck = tally.timedOut ? null : await Promise.race([rescore.recheck(pool), overall]);
    // Shutting the workers down overlaps with scoring and the record.
    const closing = pool.close();

    // 5. Score and decide.
    const familyScores = tally.familyScores();
    const score = hackability(familyScores);
    const hackRate = hackRateInterval(tally.hacks, tally.attempts, {
      seed: policy.seed,
      resamples: policy.budget.bootstrapResamples,
      confidence: policy.budget.confidence,
    });
    const errors = tally.errorGroups();
    const sideEffects = tally.sideEffectGroups();
    const decision = decide({
      policy,
      broken,
      hackability: score,
      hackRate,
      errors: errors.map((error) => ({ invariant: error.invariant, count: error.count, example: error.examples[0]?.completion ?? '' })),
      sideEffects: sideEffects.map((effect) => ({ kind: effect.kind, count: effect.count, example: effect.examples[0] ?? '' })),
    });
    if (recheck && recheck.changed > 0) {
      decision.decision = 'REJECT';
      decision.reasons.push({
        code: 'NOT_A_FUNCTION',
        message: `not a function of its inputs: ${recheck.changed} of ${recheck.total} calls scored again at the end of the audit or in a fresh process got a different reward (${recheck.example ?? ''})`,
      });
    }

    // 6. The record.
    const familyMeta = new Map(corpus.families.map((family) => [family.family, { title: family.title, hardening: family.hardening }]));
    const { findings, total: findingsTotal } = tally.findings();
    const info = pool.info;
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
      corpus: { version: corpus.version, hash: corpus.hash, families: corpus.families.length, candidates: candidateCount },
      verifier: {
        spec: options.reward,
        sha256: await sha256File(target.kind === 'file' ? target.path : info.sourceFile),
        completion_format: completionFormat,
        params: info.params,
        is_async: info.isAsync,
      },
      target: {
        answer_type: answerType,
        choices: answerType === 'choice' ? choices : null,
        format,
        rows_audited: rowsAudited,
        rows_total: rowsTotal,
        golds: plans.slice(0, rowsAudited).map((plan) => ({
          row: plan.row.index,
          answer: plan.row.answer,
          alternate: plan.alternate,
          accepted_formats: acceptedByRow.get(plan.row.index) ?? [],
        })),
      },
      families: tally.familyRecords(familyMeta),
      findings,
      findings_total: findingsTotal,
      errors,
      side_effects: sideEffects,
      honest: {
        calibration,
        variants: variantRecords,
        false_rejections: variantRecords.filter((variant) => !variant.contested && !variant.rewarded).length,
      },
      environment: { python: info.pythonVersion },
      tool: { name: TOOL.name, version: TOOL.version },
      statement: decision.decision === 'PASS' ? PASS_STATEMENT : REJECT_STATEMENT,
      timing: {
        total_ms: Math.round(totalMs),
        import_ms: Math.round(info.importMs),
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
      probes: [...honestProbes, ...tally.attackProbes()],
    };
  } finally {
    clearTimeout(deadline);
    await pool.close();
  }
}
