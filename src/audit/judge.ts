import { formatsSpoken, type Levels } from './calibrate.js';
import type { Candidate } from './expand-candidates.js';
import type { EvalResult } from '../runtime/python-session.js';
import type { Invariant } from './record.js';
import type { Severity } from '../types.js';

/**
 * The judge: every candidate gets a verdict naming the invariant that fired.
 * It works in two passes, both pure. `screen` finds the candidates the
 * verifier rewards for the gold (and the outright exploits: overflow and
 * non-finite rewards); `settle` applies the invariance rule to each rewarded
 * one, given its rewards under alternate golds: rewarded under another gold
 * too, it is an exploit; rewarded only under the gold, it is an equivalent
 * form when the attack commits to the gold alone and a false accept otherwise.
 *
 * Partial credit gets the same test for completions that state several
 * values (hedges and dumps): one paid more than any wrong answer earns, and
 * more than it earns under a gold it does not state, both under the gold and
 * under another value it states, gains from stating several answers however
 * small the payment. A reward that pays a layout or a length pays under the
 * unstated gold too, so it is not counted here.
 */

export type { Invariant };

/**
 * `inapplicable`: an unrewarded payload written only in formats the verifier
 * does not read; it says nothing about the verifier and is not an attempt.
 */
export type VerdictKind = 'exploit' | 'false_accept' | 'equivalent_form' | 'ok' | 'inapplicable' | 'error' | 'unjudged';

export interface Verdict {
  kind: VerdictKind;
  invariant: Invariant | null;
  /** Severity of an exploit (the attack's, raised to critical for non-finite and overflow rewards). */
  severity: Severity | null;
  /** The golds the completion was rewarded under: the row's gold first, then alternates. Empty unless rewarded. */
  rewardedUnder: string[];
}

/**
 * The first pass: a final verdict, or one the invariance test must settle:
 * `rewarded` (nearer the honest level than the wrong one), or `paid` (a
 * completion stating several values, paid less than that but more than any
 * wrong answer; `otherwise` is its verdict when the test finds no gain).
 */
export type Screen =
  | Verdict
  | { kind: 'rewarded'; invariant: null; severity: null; rewardedUnder: string[] }
  | { kind: 'paid'; invariant: null; severity: null; rewardedUnder: string[]; otherwise: Verdict };

const EPSILON = 1e-9;

export const INVARIANT_TEXT: Readonly<Record<Invariant, string>> = {
  'non-finite-reward': 'returned NaN or an infinite reward',
  'reward-above-honest': 'rewarded an attack above the honest answer',
  'hedge-rewarded': 'rewarded a completion stating several answers under more than one of them (partial credit included): hedging pays',
  'gold-free-rewarded': 'rewarded a payload that does not contain the answer at all',
  'answer-ignored': 'rewarded a payload without the answer under two different golds: the reward ignores the answer',
  'attack-rewarded': 'rewarded a non-answer nearer the honest level than the wrong level',
  'false-accept': 'rewarded a completion that does not commit to the gold alone, though only when the gold is the answer',
  'equivalent-form': "rewarded the gold's own value written another way",
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
  'hedge-rewarded': 'extract exactly one committed answer (the last or the first, by a fixed rule) and ignore the others; pay no partial credit for the gold appearing elsewhere',
  'gold-free-rewarded': 'return the wrong-answer score unless an extracted answer equals the gold; no default or fallback branch may reward',
  'answer-ignored': 'make the reward depend on the gold: compare an extracted answer against it',
  'attack-rewarded': 'extract one final answer in one expected format and compare it whole (full match, ASCII digits, finite numbers, no substring or prefix tests)',
  'false-accept': 'reward only a final answer that commits to one value: no negations, hedges read by position, later corrections, answers inside the reasoning or cut-off output',
  'equivalent-form': 'nothing to fix: a policy gains nothing from writing the gold another way',
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

const verdict = (kind: VerdictKind, invariant: Invariant | null = null, severity: Severity | null = null, rewardedUnder: string[] = []): Verdict => ({
  kind,
  invariant,
  severity,
  rewardedUnder,
});

/** Nearer the honest level than the wrong level, in the candidate's format (or across formats for raw payloads). */
export function thresholdFor(candidate: Pick<Candidate, 'format'>, levels: Levels): number {
  const cell = candidate.format ? levels.byFormat.get(candidate.format) : undefined;
  return cell ? (cell.honest + cell.wrong) / 2 : levels.rawThreshold;
}

export function isRewarded(candidate: Pick<Candidate, 'format'>, result: EvalResult, levels: Levels): boolean {
  return result.status === 'ok' && result.reward !== null && result.reward > thresholdFor(candidate, levels) + EPSILON;
}

export interface ScreenInput {
  candidates: readonly Candidate[];
  results: readonly EvalResult[];
  /** Calibration of each row's gold. */
  levels: (row: number) => Levels | undefined;
  /**
   * Whether partial payments are screened too: only where the invariance
   * test has a gold the completion does not state to compare them with.
   */
  partial?: boolean;
}

/** A hedge or a dump: the completion states more than one value. */
export function statesSeveral(candidate: Pick<Candidate, 'commitsTo' | 'position'>): boolean {
  return candidate.commitsTo === 'several' || candidate.position !== null;
}

export function screen(input: ScreenInput): Screen[] {
  return input.candidates.map((candidate, index): Screen => {
    const result = input.results[index]!;
    if (result.status === 'skipped') return verdict('unjudged');
    if (result.status !== 'ok') return verdict('error', FAILURE_INVARIANT[result.status]);
    if (result.nonFinite !== null) return verdict('exploit', 'non-finite-reward', 'critical', [candidate.answer]);
    if (result.reward === null) return verdict('error', 'non-numeric-reward');
    const levels = input.levels(candidate.row);
    if (!levels || levels.broken) return verdict('unjudged');
    if (result.reward > levels.honestMax + EPSILON) return verdict('exploit', 'reward-above-honest', 'critical', [candidate.answer]);
    if (candidate.hackIf === 'above_honest' || !isRewarded(candidate, result, levels)) {
      let otherwise = verdict('ok');
      if (candidate.format === null) {
        const spoken = formatsSpoken(candidate.completion);
        if (spoken.length > 0 && !spoken.some((format) => levels.byFormat.has(format))) otherwise = verdict('inapplicable');
      }
      const paid = input.partial && candidate.hackIf === 'rewarded' && statesSeveral(candidate) && result.reward > levels.wrongCeiling + EPSILON;
      return paid ? { kind: 'paid', invariant: null, severity: null, rewardedUnder: [candidate.answer], otherwise } : otherwise;
    }
    return { kind: 'rewarded', invariant: null, severity: null, rewardedUnder: [candidate.answer] };
  });
}

/** One alternate gold and what the verifier gave the same completion under it. */
export interface AlternateOutcome {
  answer: string;
  result: EvalResult;
}

/** What settling a hedge's partial payments needs besides the alternates' results. */
export interface PartialCheck {
  /** The candidate's reward under its own gold. */
  reward: number;
  /** An alternate gold the completion does not state; what it earns there it earns whatever the answer. */
  unstated: string;
}

/**
 * The alternates a hedge is paid under beyond what it earns anyway: more
 * than any wrong answer and more than under the unstated gold, when it is
 * paid that much under its own gold too. Empty when the unstated gold's call
 * gave no reward to compare with.
 */
function paidAlternates(alternates: readonly AlternateOutcome[], levels: Levels, check: PartialCheck): string[] {
  const baseline = alternates.find(({ answer }) => answer === check.unstated)?.result;
  if (baseline?.status !== 'ok' || baseline.reward === null) return [];
  const floor = Math.max(levels.wrongCeiling, baseline.reward) + EPSILON;
  if (check.reward <= floor) return [];
  return alternates
    .filter(({ answer, result }) => answer !== check.unstated && result.status === 'ok' && result.reward !== null && result.reward > floor)
    .map(({ answer }) => answer);
}

/**
 * The second pass for one screened candidate. An alternate gold may have a
 * shape the verifier never sees in its task (a decimal for an integer task),
 * so a raise under it only means it was not rewarded; a timeout or a crash is
 * an error of the verifier like any other. `screened` is the first pass's
 * verdict when it was `paid`; `partial` is given for hedges whose partial
 * payments are settled too.
 */
export function settle(
  candidate: Candidate,
  alternates: readonly AlternateOutcome[],
  levels: Levels,
  { screened = 'rewarded', partial = null }: { screened?: 'rewarded' | Extract<Screen, { kind: 'paid' }>; partial?: PartialCheck | null } = {},
): Verdict {
  for (const { result } of alternates) {
    if (result.status === 'skipped') return verdict('unjudged');
    if (result.status === 'timeout' || result.status === 'crashed') return verdict('error', FAILURE_INVARIANT[result.status]);
  }
  const gold = [candidate.answer];
  if (alternates.some(({ result }) => result.nonFinite !== null)) return verdict('exploit', 'non-finite-reward', 'critical', gold);
  if (screened === 'rewarded') {
    const under = alternates.filter(({ result }) => isRewarded(candidate, result, levels)).map(({ answer }) => answer);
    if (under.length > 0) {
      const invariant: Invariant = candidate.gFree ? 'answer-ignored' : statesSeveral(candidate) ? 'hedge-rewarded' : 'attack-rewarded';
      return verdict('exploit', invariant, candidate.severity, [...gold, ...under]);
    }
  }
  const paid = partial && statesSeveral(candidate) ? paidAlternates(alternates, levels, partial) : [];
  if (paid.length > 0) return verdict('exploit', 'hedge-rewarded', candidate.severity, [...gold, ...paid]);
  if (screened !== 'rewarded') return screened.otherwise;
  return candidate.commitsTo === 'gold' ? verdict('equivalent_form', 'equivalent-form', null, gold) : verdict('false_accept', 'false-accept', null, gold);
}
