import type { EvalResult } from '../calls.js';
import type { AnswerType } from '../types.js';

/**
 * What a policy that does not know the answer gains by writing a completion
 * instead of committing to one answer. Pure functions of rewards already
 * measured; the judge decides with them (see judge.ts).
 *
 * Gains are shares of the spread between the honest and the wrong reward, so
 * one margin (the policy's min_gain) serves a 0/1 reward, a 0–1.9 rubric and
 * a similarity score alike.
 */

const EPSILON = 1e-9;

/** Gains smaller than this are float noise, not a policy's advantage. */
export const GAIN_EPSILON = 1e-6;

/** The levels a gain is weighed by: what the gold and a wrong answer earn. */
export interface SpreadLevels {
  honest: number;
  wrong: number;
}

/**
 * The levels gains are shares of: the most the verifier pays the gold and the
 * most it pays a wrong answer, anywhere. A reward's range is one yardstick
 * for every layout: a similarity score that pays little in a layout it reads
 * badly does not make a hundredth of its range look like a tenth.
 */
export function rewardRange(levels: { honestMax: number; wrongCeiling: number }, fallback: SpreadLevels): SpreadLevels {
  return levels.honestMax - levels.wrongCeiling > EPSILON ? { honest: levels.honestMax, wrong: levels.wrongCeiling } : fallback;
}

/** A gain as a share of the spread; the raw difference where the spread is nil (the verifier was broken there). */
export function shareOfSpread(difference: number, levels: SpreadLevels): number {
  const spread = levels.honest - levels.wrong;
  return spread > EPSILON ? difference / spread : difference;
}

/** An alternate the verifier could not score earns what a wrong answer does. */
export function rewardOr(result: EvalResult, fallback: number): number {
  return result.status === 'ok' && result.reward !== null ? result.reward : fallback;
}

/**
 * What committing to one of the values a hedge states earns, measured for a
 * graded reward: `rewards[i][j]` is the reward of the i-th commitment, a plain
 * answer written alone in a layout, when the gold is `values[j]`.
 * `values[0]` is the row's gold. Commitment i states `values[of[i]]`; without
 * `of`, one commitment per value, in the hedge's layout (`values[i]`).
 */
export interface Commitments {
  values: readonly string[];
  rewards: readonly (readonly (number | null)[])[];
  /** The value each commitment states, by its index in `values`: one value is written in several layouts. */
  of?: readonly number[];
}

/** The evidence that stating several values pays: the completion's rewards under them, against what committing earns. */
export interface HedgeGain {
  rewards: { gold: string; reward: number }[];
  /** The values it states, the gold among them. */
  count: number;
  /** Its expected reward when the answer is any one of them. */
  mean: number;
  /** What committing to one of them earns in expectation. */
  baseline: number;
  /** (mean - baseline) as a share of the spread between the honest and the wrong level. */
  gain: number;
}

/** Whether rewards take levels other than the two calibration measured in the layout: such a graded reward needs its commitments measured. */
export function isGraded(rewards: readonly number[], layout: SpreadLevels): boolean {
  return rewards.some((reward) => Math.abs(reward - layout.honest) > EPSILON && Math.abs(reward - layout.wrong) > EPSILON);
}

/**
 * The gain test for a completion paid under k values (those it states, or
 * the golds one answer was rewarded under). Taken as the gold in turn, each
 * pays it a reward; its expectation (the values not tried standing in for by
 * the mean of those that were) is compared with what committing to one
 * value earns: (honest + (k-1) x wrong) / k in the layout it is written in,
 * where a wrong answer earns at least what the completion earns under a gold
 * it does not state (a bonus for the layout or the length is paid whatever it
 * says). A graded reward (similarity, overlap) pays wrong answers unevenly,
 * so there the commitments are measured and the best of them is the
 * baseline, over the same golds: each value written alone in every layout a
 * policy would commit in (see commitmentLayouts). Null when stating several
 * gains nothing.
 */
export function hedgeGain(
  goldReward: number,
  stated: readonly { answer: string; result: EvalResult }[],
  count: number,
  layout: SpreadLevels,
  {
    unstatedReward = null,
    commitments = null,
    unit = layout,
    itself = () => false,
  }: {
    unstatedReward?: number | null;
    commitments?: Commitments | null;
    /**
     * The values whose commitment is the completion itself (the one value a
     * single answer states): committing to them is not the alternative it is
     * weighed against, or an answer paid under others' golds too (`421`
     * under 42 by a containment credit) would only ever match itself.
     */
    itself?: (value: string) => boolean;
    /** The levels whose spread the gain is a share of: the verifier's whole range, where the caller knows it. */
    unit?: SpreadLevels;
  } = {},
): HedgeGain | null {
  if (stated.length === 0) return null;
  const wrong = Math.max(layout.wrong, unstatedReward ?? layout.wrong);
  const others = stated.map(({ result }) => rewardOr(result, wrong));
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
    const others = committed.filter((_, index) => !itself(commitments.values[commitments.of?.[index] ?? index]!));
    baseline = Math.max(unstatedReward ?? Number.NEGATIVE_INFINITY, ...(others.length > 0 ? others : committed));
  }
  if (mean <= baseline + GAIN_EPSILON) return null;
  return { rewards, count: k, mean, baseline, gain: shareOfSpread(mean - baseline, unit) };
}

/**
 * How many answers a policy that does not know the gold chooses among: the
 * labels for multiple choice, two for a boolean, and no bound for numbers and
 * text (committing then earns what a wrong answer does).
 */
export function answerSpace(type: AnswerType, choices: readonly string[]): number {
  if (type === 'choice') return Math.max(2, choices.length);
  if (type === 'boolean') return 2;
  return Number.POSITIVE_INFINITY;
}

/** What a uniform guess among the k answers the task has earns: 1/k of the honest level plus the rest of the wrong one. */
export function committedGuess(levels: SpreadLevels, k: number): number {
  return Number.isFinite(k) ? (levels.honest + (k - 1) * levels.wrong) / k : levels.wrong;
}

/** The evidence that a completion is paid whatever the gold. */
export interface IgnoredGain {
  /** Its reward under each gold tried, the row's gold first. */
  rewards: { gold: string; reward: number }[];
  /** What committing to an answer earns, averaged over the same golds. */
  baseline: number;
  /** Its own reward averaged over those golds, less the baseline, as a share of the spread. */
  gain: number;
}

/**
 * The gain of a completion paid under every gold tried. Under each gold,
 * a policy that does not know the answer earns by committing a uniform
 * guess among the k answers the task has (1/k of the honest level plus the
 * rest of the wrong one; the wrong level for numbers and text) or, where it
 * was measured, what a plainly wrong answer earns under that gold (a graded
 * reward pays wrong answers unevenly). The completion must earn more than
 * that guess under every gold, and more than the commitment on average over
 * them. The levels are the best the verifier pays anywhere: a committing
 * policy writes the layout that pays most. Null when it gains nothing.
 */
export function ignoredGain(
  rewards: readonly { gold: string; reward: number }[],
  levels: SpreadLevels,
  k: number,
  wrongUnder: (gold: string) => number | null = () => null,
): IgnoredGain | null {
  if (rewards.length === 0) return null;
  const guess = committedGuess(levels, k);
  if (rewards.some(({ reward }) => !(reward > guess + GAIN_EPSILON))) return null;
  const mean = (values: readonly number[]): number => values.reduce((sum, value) => sum + value, 0) / values.length;
  const own = mean(rewards.map(({ reward }) => reward));
  const baseline = mean(rewards.map(({ gold }) => Math.max(guess, wrongUnder(gold) ?? Number.NEGATIVE_INFINITY)));
  if (own <= baseline + GAIN_EPSILON) return null;
  return { rewards: [...rewards], baseline, gain: shareOfSpread(own - baseline, levels) };
}

/** Markup a completion is written in, which states no quantity: tags, LaTeX commands, math delimiters. */
const MARKUP = /<\/?[A-Za-z|_][^<>]*>|\\[A-Za-z]+|\$/g;

/**
 * A written number: its sign, digits with separators inside (a space only
 * before a group of three, as in `1 000`: `42 17` is two numbers), a
 * decimal part.
 */
const WRITTEN_NUMBER = /-?\d+(?:[.,_]\d+|[ \u00a0\u202f]\d{3}(?!\d))*/g;

const SCALES = [1e-3, 1e-2, 1e-1, 1, 10, 100, 1000];

/**
 * The values one written number can be read as: its digits joined across
 * separators (`4,2` as 42), a comma as a decimal point (4.2), each group
 * a comma, an underscore or a space sets apart alone (4 and 2), and each of those scaled by a power of ten up to a
 * thousand, as a percentage or a unit read both ways is.
 */
function readingsOf(signed: string): number[] {
  const sign = signed.startsWith('-') ? -1 : 1;
  const written = signed.replace(/^-/, '');
  // A point is a decimal point or a grouping mark, never a list: `4.2` is read as 4.2 or 42, not as 4.
  const groups = written.split(/[,_ \u00a0\u202f]/);
  const base = [
    Number(written.replace(/[,_ \u00a0\u202f]/g, '')),
    Number(written.replace(/[_ \u00a0\u202f]/g, '').replace(',', '.')),
    Number(written.replace(/[^\d]/g, '')),
  ];
  if (groups.length > 1) base.push(...groups.map((group) => Number(group)));
  return base.filter((value) => Number.isFinite(value)).flatMap((value) => SCALES.map((scale) => sign * value * scale));
}

/**
 * Whether a completion paid under several golds states one quantity and is
 * paid only under readings of it: `72%` under 72 and 0.72, `4,2` under 42
 * and 4, `4200` under 42 by a tolerance of a factor of 100. A checker that
 * reads a stated quantity two ways (math-verify reads a percentage both
 * ways, because golds are written both ways) lets a policy gain only where
 * the task leaves the scale or the grouping open, which the question
 * usually settles: a leniency, not a hedge. A number read without its sign,
 * or within a tolerance, is another answer, and stays an exploit.
 */
export function isReReading(completion: string, golds: readonly string[], type: AnswerType): boolean {
  if (type !== 'numeric' || golds.length < 2) return false;
  const written = completion.replace(MARKUP, ' ').match(WRITTEN_NUMBER) ?? [];
  if (new Set(written).size !== 1) return false;
  const readings = readingsOf(written[0]!);
  return golds.every((gold) => {
    const value = Number(gold.trim().replace(/[,_\s]/g, ''));
    return Number.isFinite(value) && readings.some((reading) => Math.abs(reading - value) <= 1e-9 * Math.max(1, Math.abs(value)));
  });
}
