import { alternateGolds } from './invariance.js';
import { attackFormats, calibrationProbes, computeLevels, honestVariants, type Levels, type Probe } from './calibrate.js';
import type { Corpus } from './corpus.js';
import type { Evaluator } from './evaluator.js';
import { expandCandidates, type Candidate } from './expand-candidates.js';
import { isRewarded, screen, settle, type AlternateOutcome, type Verdict } from './judge.js';
import type { GoldPlan } from './plan-audit.js';
import { calibrationRows, excerpt, type AuditRecord } from './record.js';
import type { GateProbe, OutcomeTally } from './tally-outcomes.js';
import type { EvalRequest } from '../runtime/python-session.js';
import type { CustomFormat, FormatName } from './answer-values.js';
import type { AnswerFormat, AnswerType } from '../types.js';

/**
 * The per-chunk stages of the gate, in order: calibrate each gold, attack it
 * in the formats it was accepted in (with honest variants alongside), screen
 * the results, and settle every rewarded candidate with the invariance test.
 * Only counts and bounded examples leave a chunk, through the tally.
 */

export interface BrokenGold {
  row: number;
  answer: string;
  reason: NonNullable<Levels['broken']>;
}

/** What the chunks accumulate for the record, besides the tally. */
export interface AuditState {
  tally: OutcomeTally;
  acceptedByRow: Map<number, FormatName[]>;
  calibration: AuditRecord['honest']['calibration'];
  variants: AuditRecord['honest']['variants'];
  honestProbes: GateProbe[];
  broken: BrokenGold[];
  candidateCount: number;
  /**
   * Milliseconds per phase: start (Python and the verifier's import) and plan
   * overlap; calibrate, attack, invariance and recheck are the verifier calls
   * of each step; judge is the Node work between them (building candidates,
   * screening, settling, tallying); score is the decision.
   */
  phases: Record<string, number>;
}

function requestFor(plan: GoldPlan, completion: string, answer = plan.row.answer): EvalRequest {
  return { completion, answer, prompt: plan.row.prompt, info: plan.row.info };
}

function timed<T>(state: AuditState, phase: string, started: number, value: T): T {
  state.phases[phase] = (state.phases[phase] ?? 0) + (performance.now() - started);
  return value;
}

/** Calibration: the gold and a wrong value in every format; returns each row's levels. */
export async function calibrateChunk(
  chunk: readonly GoldPlan[],
  evaluator: Evaluator,
  state: AuditState,
  custom: readonly CustomFormat[],
): Promise<Map<number, Levels>> {
  const started = performance.now();
  const sets: { plan: GoldPlan; probes: Probe[] }[] = chunk.map((plan) => ({ plan, probes: calibrationProbes(plan.context.gold, plan.context.wrong[0]!, custom) }));
  // A verifier that hangs costs one call timeout (and its re-run) here: evaluation stops at the first one.
  const results = await evaluator.evaluate(
    sets.flatMap(({ plan, probes }) => probes.map((probe) => requestFor(plan, probe.completion))),
    false,
    // Shuffled within each row's probes only, so a hang is pinned on its row.
    sets.map(({ probes }) => probes.length),
  );
  state.tally.addSideEffects(results);
  const levelsByRow = new Map<number, Levels>();
  let offset = 0;
  for (const { plan, probes } of sets) {
    const slice = results.slice(offset, offset + probes.length);
    offset += probes.length;
    const levels = computeLevels(probes, slice);
    levelsByRow.set(plan.row.index, levels);
    state.acceptedByRow.set(plan.row.index, attackFormats(levels, 'auto'));
    state.calibration.push(...calibrationRows(plan.row.index, levels.table));
    if (levels.broken) state.broken.push({ row: plan.row.index, answer: plan.row.answer, reason: levels.broken });
    probes.forEach((probe, index) => {
      const result = slice[index]!;
      if (probe.kind !== 'honest' || result.status !== 'ok' || result.reward === null || !Number.isFinite(result.reward)) return;
      state.honestProbes.push({ kind: 'honest', row: plan.row.index, answer: plan.row.answer, completion: probe.completion, reward: result.reward, format: probe.format, think: probe.think });
    });
  }
  return timed(state, 'calibrate', started, levelsByRow);
}

export interface AttackSettings {
  corpus: Corpus;
  answerType: AnswerType;
  /** Built-in formats to attack in ('auto': every accepted one). */
  format: readonly AnswerFormat[] | 'auto';
  /** Rows in the whole audit and rows before this chunk: for the progress estimate. */
  totalRows: number;
  rowsBefore: number;
}

/** Attack, screen and settle one chunk of calibrated rows. */
export async function attackChunk(
  chunk: readonly GoldPlan[],
  levelsByRow: ReadonlyMap<number, Levels>,
  evaluator: Evaluator,
  state: AuditState,
  settings: AttackSettings,
  reserve: (expected: number) => void,
): Promise<void> {
  let started = performance.now();
  const planByRow = new Map(chunk.map((plan) => [plan.row.index, plan]));
  const candidates: Candidate[] = [];
  const variants: { plan: GoldPlan; form: string; contested: boolean; completion: string; format: FormatName }[] = [];
  for (const plan of chunk) {
    const levels = levelsByRow.get(plan.row.index)!;
    if (levels.broken) continue;
    const formats = attackFormats(levels, settings.format);
    const thinkFormats = levels.thinkFormats.filter((format) => formats.includes(format));
    const thinkRaw = formats.length > 0 && formats.every((format) => thinkFormats.includes(format));
    candidates.push(...expandCandidates(settings.corpus, { ...plan.context, formats, thinkFormats, thinkRaw }, plan.row.index));
    const firstFormat = formats[0];
    if (firstFormat) {
      for (const variant of honestVariants(plan.row.answer, settings.answerType, firstFormat)) variants.push({ plan, format: firstFormat, ...variant });
    }
  }
  state.candidateCount += candidates.length;
  evaluator.expectedTotal = Math.round((state.candidateCount / (settings.rowsBefore + chunk.length)) * settings.totalRows);
  started = timed(state, 'judge', started, performance.now());
  reserve(evaluator.expectedTotal);
  // Attacks and honest variants go out together: one round of batches, no idle worker between them.
  const combined = await evaluator.evaluate(
    [
      ...candidates.map((candidate) => requestFor(planByRow.get(candidate.row)!, candidate.completion)),
      ...variants.map((variant) => requestFor(variant.plan, variant.completion)),
    ],
    true,
  );
  started = timed(state, 'attack', started, performance.now());
  const attackResults = combined.slice(0, candidates.length);
  const variantResults = combined.slice(candidates.length);
  state.tally.addSideEffects(variantResults);
  variants.forEach((variant, index) => {
    const result = variantResults[index]!;
    const levels = levelsByRow.get(variant.plan.row.index)!;
    state.variants.push({
      row: variant.plan.row.index,
      form: variant.form,
      contested: variant.contested,
      completion: excerpt(variant.completion, 120),
      reward: result.status === 'ok' ? result.reward : null,
      rewarded: isRewarded({ format: variant.format }, result, levels),
    });
  });

  // The invariance test: every rewarded candidate again, under alternate golds.
  const screens = screen({ candidates, results: attackResults, levels: (row) => levelsByRow.get(row) });
  const pending: { index: number; answers: string[] }[] = [];
  screens.forEach((verdict, index) => {
    if (verdict.kind !== 'rewarded') return;
    const candidate = candidates[index]!;
    const plan = planByRow.get(candidate.row)!;
    const answers = alternateGolds(candidate.completion, {
      gold: plan.row.answer,
      type: plan.context.type,
      choices: plan.context.choices,
      wrong: plan.context.wrong,
      fresh: plan.alternate,
    });
    pending.push({ index, answers });
  });
  started = timed(state, 'judge', started, performance.now());
  const alternateResults = await evaluator.evaluate(
    pending.flatMap(({ index, answers }) => answers.map((answer) => requestFor(planByRow.get(candidates[index]!.row)!, candidates[index]!.completion, answer))),
  );
  started = timed(state, 'invariance', started, performance.now());
  state.tally.addSideEffects(alternateResults);
  const settled = new Map<number, Verdict>();
  // A call that failed under an alternate gold is the one an error report should show.
  const shown = [...attackResults];
  let offset = 0;
  for (const { index, answers } of pending) {
    const candidate = candidates[index]!;
    const outcomes: AlternateOutcome[] = answers.map((answer, k) => ({ answer, result: alternateResults[offset + k]! }));
    offset += answers.length;
    const verdict = settle(candidate, outcomes, levelsByRow.get(candidate.row)!);
    settled.set(index, verdict);
    const failed = outcomes.find(({ result }) => result.status === 'timeout' || result.status === 'crashed');
    if (verdict.kind === 'error' && failed) shown[index] = failed.result;
  }
  const verdicts = screens.map((verdict, index): Verdict => (verdict.kind === 'rewarded' ? settled.get(index)! : verdict));
  state.tally.addJudged(candidates, verdicts, shown);
  timed(state, 'judge', started, undefined);
}
