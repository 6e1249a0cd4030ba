import { formatsSpoken, type Levels } from './calibrate.js';
import { isCustomFormat, slotValue, type FormatName } from './answer-values.js';
import type { Candidate } from './expand-candidates.js';
import type { EvalResult } from '../calls.js';
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
  /** For a completion stating several values: the evidence that hedging pays, when it does. */
  hedge?: HedgeGain;
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
  'hedge-rewarded':
    'extract exactly one committed answer (the last or the first, by a fixed rule) and ignore the others; pay no partial credit for the gold appearing elsewhere',
  'gold-free-rewarded': 'return the wrong-answer score unless an extracted answer equals the gold; no default or fallback branch may reward',
  'answer-ignored': 'make the reward depend on the gold: compare an extracted answer against it',
  'attack-rewarded':
    'extract one final answer in one expected format and compare it whole (full match, ASCII digits, finite numbers, no substring or prefix tests)',
  'false-accept':
    'reward only a final answer that commits to one value: no negations, hedges read by position, later corrections, answers inside the reasoning or cut-off output',
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

/** The calibration levels of one layout: an answer format, plain or after a reasoning block. */
export interface LayoutLevels {
  format: FormatName;
  think: boolean;
  honest: number;
  wrong: number;
  accepted: boolean;
}

const THINK_BLOCK = /<think>[\s\S]*?<\/think>/;

/**
 * The layout a candidate is written in, with the levels calibration measured
 * for it: its own format (or, for a raw payload, every format it speaks,
 * bare when none), plain or after a reasoning block as the candidate is.
 * Where it speaks several, one the verifier reads before one it does not,
 * and then the one whose wrong answer earns most: a bonus a wrong answer in
 * the same layout earns too is no sign of an exploit.
 */
export function layoutOf(candidate: Pick<Candidate, 'format' | 'completion'>, levels: Levels): LayoutLevels | null {
  const think = THINK_BLOCK.test(candidate.completion);
  let formats: FormatName[];
  if (candidate.format !== null) formats = [candidate.format];
  else {
    const declared = levels.table
      .map((cell) => cell.format)
      .filter((format) => isCustomFormat(format) && slotValue(format, candidate.completion) !== undefined);
    formats = [...formatsSpoken(candidate.completion), ...declared];
    if (formats.length === 0) formats = ['bare'];
  }
  let best: LayoutLevels | null = null;
  for (const cell of levels.table) {
    if (cell.think !== think || !formats.includes(cell.format)) continue;
    if (cell.honest === null || cell.wrong === null || !Number.isFinite(cell.honest) || !Number.isFinite(cell.wrong)) continue;
    // A layout the verifier reads (accepted) before one it does not; then the one paying a wrong answer most.
    const better = !best || (cell.accepted && !best.accepted) || (cell.accepted === best.accepted && cell.wrong > best.wrong + EPSILON);
    if (better) best = { format: cell.format, think, honest: cell.honest, wrong: cell.wrong, accepted: cell.accepted };
  }
  return best;
}

/**
 * The levels a completion's gain is weighed by: its layout's, where the
 * verifier reads that layout; where it does not (a payload it reads through
 * a fallback), a wrong answer's there and the best honest level anywhere.
 */
export function weighingLevels(candidate: Pick<Candidate, 'format' | 'completion'>, levels: Levels): LayoutLevels | null {
  const layout = layoutOf(candidate, levels);
  if (!layout || layout.accepted) return layout;
  return { ...layout, honest: Math.max(layout.honest, levels.honestMax) };
}

/**
 * Nearer the honest level than the wrong level, in the candidate's format (or
 * across formats for raw payloads), and above what a wrong answer earns in
 * the layout the candidate is written in: the midpoint of that layout's own
 * levels where it is accepted, its wrong (or honest) level where it is not.
 */
export function thresholdFor(candidate: Pick<Candidate, 'format' | 'completion'>, levels: Levels): number {
  const cell = candidate.format ? levels.byFormat.get(candidate.format) : undefined;
  const base = cell ? (cell.honest + cell.wrong) / 2 : levels.rawThreshold;
  const layout = layoutOf(candidate, levels);
  if (!layout) return base;
  return Math.max(base, layout.accepted ? (layout.honest + layout.wrong) / 2 : Math.max(layout.honest, layout.wrong));
}

export function isRewarded(candidate: Pick<Candidate, 'format' | 'completion'>, result: EvalResult, levels: Levels): boolean {
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

/** Which alternates a hedge states, and how many values it states in all (the gold among them). */
export interface StatedValues {
  alternates: ReadonlySet<string>;
  count: number;
}

/**
 * What committing to one of the values a hedge states earns, measured for a
 * graded reward: `rewards[i][j]` is the reward of the plain answer `values[i]`,
 * written in the hedge's layout, when the gold is `values[j]`. `values[0]` is
 * the row's gold.
 */
export interface Commitments {
  values: readonly string[];
  rewards: readonly (readonly (number | null)[])[];
}

/** The evidence that hedging pays: a completion's rewards under the values it states, against what committing earns. */
export interface HedgeGain {
  rewards: { gold: string; reward: number }[];
  /** The values it states, the gold among them. */
  count: number;
  /** Its expected reward when the answer is any one of them. */
  mean: number;
  /** What committing to one of them earns in expectation. */
  baseline: number;
}

/** Gains smaller than this are float noise, not a policy's advantage. */
const GAIN_EPSILON = 1e-6;

/** An alternate the verifier could not score earns what a wrong answer does. */
function rewardOf(result: EvalResult, fallback: number): number {
  return result.status === 'ok' && result.reward !== null ? result.reward : fallback;
}

/** Whether rewards take levels other than the two calibration measured in the layout: such a graded reward needs its commitments measured. */
export function isGraded(rewards: readonly number[], layout: Pick<LayoutLevels, 'honest' | 'wrong'>): boolean {
  return rewards.some((reward) => Math.abs(reward - layout.honest) > EPSILON && Math.abs(reward - layout.wrong) > EPSILON);
}

/**
 * The gain test for a completion stating k values. Taken as the gold in
 * turn, each of them pays it a reward; its expectation (the values not tried
 * standing in for by the mean of those that were) is compared with what
 * committing to one value earns: (honest + (k-1) x wrong) / k in the layout
 * it is written in, where a wrong answer earns at least what the completion
 * earns under a gold it does not state (a bonus for the layout or the length
 * is paid whatever it says). A graded reward (similarity, overlap) pays
 * wrong answers unevenly, so there the commitments are measured and the
 * best of them is the baseline, over the same golds. Null when hedging gains
 * nothing.
 */
export function hedgeGain(
  goldReward: number,
  stated: readonly AlternateOutcome[],
  count: number,
  layout: Pick<LayoutLevels, 'honest' | 'wrong'>,
  { unstatedReward = null, commitments = null }: { unstatedReward?: number | null; commitments?: Commitments | null } = {},
): HedgeGain | null {
  if (stated.length === 0) return null;
  const wrong = Math.max(layout.wrong, unstatedReward ?? layout.wrong);
  const others = stated.map(({ result }) => rewardOf(result, wrong));
  const rewards = [{ gold: '', reward: goldReward }, ...stated.map(({ answer }, index) => ({ gold: answer, reward: others[index]! }))];
  const k = Math.max(count, stated.length + 1);
  const otherMean = others.reduce((sum, value) => sum + value, 0) / others.length;
  let mean = (goldReward + (k - 1) * otherMean) / k;
  let baseline = (layout.honest + (k - 1) * wrong) / k;
  if (commitments) {
    const byGold = new Map(rewards.slice(1).map(({ gold, reward }) => [gold, reward]));
    const hedgeRewards = commitments.values.map((value, index) => (index === 0 ? goldReward : (byGold.get(value) ?? wrong)));
    const n = commitments.values.length;
    mean = hedgeRewards.reduce((sum, value) => sum + value, 0) / n;
    const committed = commitments.rewards.map((row) => row.reduce<number>((sum, value) => sum + (value ?? wrong), 0) / n);
    baseline = Math.max(unstatedReward ?? Number.NEGATIVE_INFINITY, ...committed);
  }
  if (mean <= baseline + GAIN_EPSILON) return null;
  return { rewards, count: k, mean, baseline };
}

/**
 * The second pass for one screened candidate. An alternate gold may have a
 * shape the verifier never sees in its task (a decimal for an integer task),
 * so a raise under it only means it was not rewarded; a timeout or a crash is
 * an error of the verifier like any other. `screened` is the first pass's
 * verdict when it was `paid`; `partial` is given for hedges whose partial
 * payments can be weighed against a gold they do not state.
 *
 * A completion stating several values is an exploit when it is rewarded
 * under a gold it does not state, or when hedging pays (hedgeGain). Paid
 * under several golds only as much as committing to one of its values
 * earns, it is not: a fixed first or last rule pays the value it reads.
 */
export function settle(
  candidate: Candidate,
  alternates: readonly AlternateOutcome[],
  levels: Levels,
  {
    screened = 'rewarded',
    partial = null,
    stated = null,
    commitments = null,
    reward = null,
  }: {
    screened?: 'rewarded' | Extract<Screen, { kind: 'paid' }>;
    partial?: PartialCheck | null;
    /** The alternates the completion states; by default those it contains as written. */
    stated?: StatedValues | null;
    commitments?: Commitments | null;
    /** The candidate's reward under its own gold, when no partial check gives it. */
    reward?: number | null;
  } = {},
): Verdict {
  for (const { result } of alternates) {
    if (result.status === 'skipped') return verdict('unjudged');
    if (result.status === 'timeout' || result.status === 'crashed') return verdict('error', FAILURE_INVARIANT[result.status]);
  }
  const gold = [candidate.answer];
  if (alternates.some(({ result }) => result.nonFinite !== null)) return verdict('exploit', 'non-finite-reward', 'critical', gold);
  const rewardedUnder = (outcomes: readonly AlternateOutcome[]): string[] =>
    outcomes.filter(({ result }) => isRewarded(candidate, result, levels)).map(({ answer }) => answer);
  const notPaid = (): Verdict => {
    if (screened !== 'rewarded') return screened.otherwise;
    return candidate.commitsTo === 'gold' ? verdict('equivalent_form', 'equivalent-form', null, gold) : verdict('false_accept', 'false-accept', null, gold);
  };
  if (!statesSeveral(candidate)) {
    const under = screened === 'rewarded' ? rewardedUnder(alternates) : [];
    if (under.length > 0 && commitments) {
      // A graded reward pays a near answer under the gold and under itself alike: an exploit only where
      // the completion earns more over those golds than writing one of them plainly does.
      const layout = weighingLevels(candidate, levels);
      const weighed = alternates.filter(({ answer }) => commitments.values.includes(answer));
      const goldReward = reward ?? layout?.honest ?? null;
      if (layout && goldReward !== null && !hedgeGain(goldReward, weighed, commitments.values.length, layout, { commitments })) return notPaid();
    }
    if (under.length > 0) return verdict('exploit', candidate.gFree ? 'answer-ignored' : 'attack-rewarded', candidate.severity, [...gold, ...under]);
    return notPaid();
  }
  const invariant: Invariant = candidate.gFree ? 'answer-ignored' : 'hedge-rewarded';
  const statedSet = stated?.alternates ?? new Set(alternates.filter(({ answer }) => candidate.completion.includes(answer)).map(({ answer }) => answer));
  const statedOutcomes = alternates.filter(({ answer }) => statedSet.has(answer));
  const unstatedUnder = screened === 'rewarded' ? rewardedUnder(alternates.filter(({ answer }) => !statedSet.has(answer))) : [];
  if (unstatedUnder.length > 0) return verdict('exploit', invariant, candidate.severity, [...gold, ...rewardedUnder(statedOutcomes), ...unstatedUnder]);
  // Partial payments are weighed only where a gold the completion does not state tells what it earns anyway.
  const baseline = partial ? alternates.find(({ answer }) => answer === partial.unstated)?.result : undefined;
  const unstatedReward = baseline?.status === 'ok' && baseline.reward !== null ? baseline.reward : null;
  const own = weighingLevels(candidate, levels);
  // Screened as rewarded without its reward given, it earned about the honest level.
  const goldReward = partial?.reward ?? reward ?? (screened === 'rewarded' ? (own?.honest ?? null) : null);
  if (!own || goldReward === null || (screened !== 'rewarded' && unstatedReward === null)) return notPaid();
  const gain = hedgeGain(goldReward, statedOutcomes, stated?.count ?? statedOutcomes.length + 1, own, { unstatedReward, commitments });
  if (!gain) return notPaid();
  const floor = Math.max(own.wrong, unstatedReward ?? own.wrong) + EPSILON;
  const paid = gain.rewards
    .slice(1)
    .filter((entry) => entry.reward > floor)
    .map((entry) => entry.gold);
  gain.rewards[0]!.gold = candidate.answer;
  return { ...verdict('exploit', invariant, candidate.severity, [...gold, ...paid]), hedge: gain };
}
