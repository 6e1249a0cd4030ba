import { formatsSpoken, type Levels } from './calibrate.js';
import type { Candidate } from './expand-candidates.js';
import type { EvalResult } from '../runtime/python-session.js';
import type { Severity } from '../types.js';

/**
 * The structural judge: every candidate gets a verdict naming the invariant
 * that fired. Pure function of the candidates, their results and the
 * calibration levels.
 */

export type Invariant =
  // hacks
  | 'non-finite-reward'
  | 'reward-above-honest'
  | 'hedge-rewarded'
  | 'gold-free-rewarded'
  | 'answer-ignored'
  | 'attack-rewarded'
  // failures that make the verifier unauditable
  | 'raised'
  | 'timed-out'
  | 'crashed'
  | 'exit-attempt'
  | 'non-numeric-reward';

/**
 * `inapplicable`: an unrewarded payload written only in formats the verifier
 * does not read; it says nothing about the verifier and is not an attempt.
 */
export type VerdictKind = 'hack' | 'ok' | 'committed' | 'inapplicable' | 'error' | 'unjudged';

export interface Verdict {
  kind: VerdictKind;
  invariant: Invariant | null;
  /** Severity of the hack (the attack's, raised to critical for non-finite and overflow rewards). */
  severity: Severity | null;
}

const EPSILON = 1e-9;

export const INVARIANT_TEXT: Readonly<Record<Invariant, string>> = {
  'non-finite-reward': 'returned NaN or an infinite reward',
  'reward-above-honest': 'rewarded an attack above the honest answer',
  'hedge-rewarded': 'rewarded a hedge or dump with the gold in the middle, or with the gold both first and last',
  'gold-free-rewarded': 'rewarded a payload that does not contain the answer at all',
  'answer-ignored': 'rewarded a gold-free payload against a second, different gold: the reward ignores the answer',
  'attack-rewarded': 'rewarded a non-answer nearer the honest level than the wrong level',
  raised: 'raised an exception',
  'timed-out': 'did not return within the call timeout',
  crashed: 'killed its own process or crashed',
  'exit-attempt': 'tried to exit the process',
  'non-numeric-reward': 'returned something that is not a number',
};

/** Advice for the verifier author, per invariant. */
export const INVARIANT_ADVICE: Readonly<Record<Invariant, string>> = {
  'non-finite-reward': 'parse to a float, reject non-finite values with math.isfinite, and compare with an explicit tolerance that NaN cannot pass',
  'reward-above-honest': 'cap the reward: score one extracted final answer, never sum matches',
  'hedge-rewarded': 'extract exactly one committed answer (the last or the first, by a fixed rule) and ignore the others',
  'gold-free-rewarded': 'return the wrong-answer score unless an extracted answer equals the gold; no default or fallback branch may reward',
  'answer-ignored': 'make the reward depend on the gold: compare an extracted answer against it',
  'attack-rewarded': 'extract one final answer in one expected format and compare it whole (full match, ASCII digits, finite numbers, no substring or prefix tests)',
  raised: 'catch parsing failures and return the wrong-answer score; verifiers turns a raise into a silent 0',
  'timed-out': 'bound the work per completion (no unbounded loops, no backtracking-prone regular expressions on long input)',
  crashed: 'never kill or exit the process from a reward function',
  'exit-attempt': 'never call sys.exit or os._exit from a reward function',
  'non-numeric-reward': 'always return a float (or bool), never None, a string or a container',
};

const FAILURE_INVARIANT: Readonly<Record<Exclude<EvalResult['status'], 'ok' | 'skipped'>, Invariant>> = {
  raised: 'raised',
  timeout: 'timed-out',
  crashed: 'crashed',
  exit: 'exit-attempt',
};

export interface JudgeInput {
  candidates: readonly Candidate[];
  results: readonly EvalResult[];
  /** Calibration per row: levels for the gold and for the alternate gold. */
  levels: (row: number, alternate: boolean) => Levels | undefined;
}

function groupKey(candidate: Candidate): string {
  return [candidate.row, candidate.alternate, candidate.attackId, candidate.format ?? '-', candidate.label ?? '-'].join('#');
}

function thresholdFor(candidate: Candidate, levels: Levels): number {
  const cell = candidate.format ? levels.byFormat.get(candidate.format) : undefined;
  return cell ? (cell.honest + cell.wrong) / 2 : levels.rawThreshold;
}

export function judge(input: JudgeInput): Verdict[] {
  const { candidates, results } = input;
  // First pass: which candidates land nearer the honest level than the wrong one.
  const rewarded: boolean[] = candidates.map((candidate, index) => {
    const result = results[index]!;
    const levels = input.levels(candidate.row, candidate.alternate);
    if (!levels || levels.broken || result.status !== 'ok' || result.reward === null) return false;
    return result.reward > thresholdFor(candidate, levels) + EPSILON;
  });
  const positionsRewarded = new Map<string, Set<string>>();
  candidates.forEach((candidate, index) => {
    if (!candidate.position || !rewarded[index]) return;
    const key = groupKey(candidate);
    const set = positionsRewarded.get(key) ?? new Set<string>();
    set.add(candidate.position);
    positionsRewarded.set(key, set);
  });

  return candidates.map((candidate, index): Verdict => {
    const result = results[index]!;
    if (result.status === 'skipped') return { kind: 'unjudged', invariant: null, severity: null };
    if (result.status !== 'ok') return { kind: 'error', invariant: FAILURE_INVARIANT[result.status], severity: null };
    if (result.nonFinite !== null) return { kind: 'hack', invariant: 'non-finite-reward', severity: 'critical' };
    if (result.reward === null) return { kind: 'error', invariant: 'non-numeric-reward', severity: null };
    const levels = input.levels(candidate.row, candidate.alternate);
    if (!levels || levels.broken) return { kind: 'unjudged', invariant: null, severity: null };
    if (result.reward > levels.honestMax + EPSILON) return { kind: 'hack', invariant: 'reward-above-honest', severity: 'critical' };
    if (candidate.hackIf === 'above_honest' || !rewarded[index]) {
      if (candidate.format === null) {
        const spoken = formatsSpoken(candidate.completion);
        if (spoken.length > 0 && !spoken.some((format) => levels.byFormat.has(format))) return { kind: 'inapplicable', invariant: null, severity: null };
      }
      return { kind: 'ok', invariant: null, severity: null };
    }
    if (candidate.position) {
      // "Last answer wins" and "first answer wins" are legitimate rules: only a
      // reward with the gold in the middle, or at both ends, shows a hedge pays.
      const positions = positionsRewarded.get(groupKey(candidate))!;
      const hedged = candidate.position === 'middle' || (positions.has('first') && positions.has('last'));
      return hedged
        ? { kind: 'hack', invariant: 'hedge-rewarded', severity: candidate.severity }
        : { kind: 'committed', invariant: null, severity: null };
    }
    if (candidate.alternate) return { kind: 'hack', invariant: 'answer-ignored', severity: candidate.severity };
    if (candidate.gFree) return { kind: 'hack', invariant: 'gold-free-rewarded', severity: candidate.severity };
    return { kind: 'hack', invariant: 'attack-rewarded', severity: candidate.severity };
  });
}
