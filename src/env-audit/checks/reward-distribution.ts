import type { RewardSample } from '../input-files.js';
import { clampScore, notApplicable, notRun, statusFor, type CheckResult } from '../record.js';

/**
 * Reward distribution over an evaluation results file: enough samples (fewer
 * cannot be judged, so the check does not run and the audit cannot decide), a
 * signal that varies (not all identical, standard deviation above 0.05), and
 * the shares of zero rewards and malformed completions. A collapsed reward
 * gives the learner nothing to follow. A pure function of the samples.
 */

/** Scored samples the check needs to judge a reward's distribution (emitted READMEs plan their vf-eval runs to reach it). */
export const MIN_SAMPLES = 20;
const MIN_STD = 0.05;
const MAX_ZERO_SHARE = 0.9;
const MAX_MALFORMED_SHARE = 0.1;
const LAYOUT_TEXT: Readonly<Record<string, string>> = { 'verifiers-v1': 'verifiers 0.4 traces', 'verifiers-v0': 'verifiers 0.3 results' };
const KIND_TEXT: Readonly<Record<string, string>> = { 'verifiers-v1': 'a verifiers 0.4', 'verifiers-v0': 'a classic verifiers (0.3)' };

/** What `gatekept scan` found in the same rollouts, reported beside the distribution. */
export interface ExploitScan {
  judged: number;
  exploits: number;
  point: number;
  hi: number;
  /** The policy's scan bound, and whether the scan rejected on it. */
  bound: number;
  rejected: boolean;
  /** Lines of the first exploits. */
  lines: number[];
}

export function checkRewardDistribution(
  results: { file: string; layout: string; samples: readonly RewardSample[] } | null,
  /** The environment's kind, when known: a results file of the other library's layout was written by another environment's run. */
  envKind: string | null = null,
  /** The scan of the same rollouts through the environment's path; a string says why it could not run. */
  scanned: ExploitScan | string | null = null,
): CheckResult {
  if (results === null) return notApplicable('reward_distribution', 'not checked: no --results file given');
  const rewards = results.samples.map((sample) => sample.reward).filter((value): value is number => value !== null);
  const n = rewards.length;
  const mean = n === 0 ? 0 : rewards.reduce((sum, value) => sum + value, 0) / n;
  const std = n === 0 ? 0 : Math.sqrt(rewards.reduce((sum, value) => sum + (value - mean) ** 2, 0) / n);
  const distinct = new Set(rewards).size;
  const zeroShare = n === 0 ? 0 : rewards.filter((value) => value === 0).length / n;
  const malformed = results.samples.filter((sample) => sample.malformed).length;
  const malformedShare = results.samples.length === 0 ? 0 : malformed / results.samples.length;
  const failures: string[] = [];
  const warnings: string[] = [];
  if (n > 0 && distinct === 1) failures.push(`every reward is ${rewards[0]}`);
  else if (n > 0 && std <= MIN_STD) failures.push(`standard deviation ${std.toFixed(3)} is not above ${MIN_STD}`);
  if (zeroShare >= MAX_ZERO_SHARE && distinct > 1) warnings.push(`${(zeroShare * 100).toFixed(0)}% of rewards are 0`);
  if (malformedShare >= MAX_MALFORMED_SHARE) warnings.push(`${(malformedShare * 100).toFixed(0)}% of completions are malformed`);
  if (envKind !== null && envKind !== results.layout) {
    warnings.push(
      `the file holds ${LAYOUT_TEXT[results.layout] ?? results.layout} and the environment is ${KIND_TEXT[envKind] ?? envKind} one: check that it is this environment's run`,
    );
  }
  // Rewards a policy earns whatever the answer is make the distribution's mean a measure of the hack, not of skill.
  if (scanned !== null && typeof scanned !== 'string' && scanned.exploits > 0) {
    warnings.push(
      `${scanned.exploits} of ${scanned.judged} rollouts are exploits (rate ${scanned.point}, upper bound ${scanned.hi}${scanned.rejected ? ` not below ${scanned.bound}` : ''}; first at line ${scanned.lines.join(', ')}): see gatekept scan`,
    );
  }
  const round = (value: number) => Math.round(value * 10000) / 10000;
  const evidence = {
    file: results.file,
    layout: results.layout,
    samples: results.samples.length,
    scored: n,
    mean: round(mean),
    std: round(std),
    min: n === 0 ? null : rewards.reduce((a, b) => Math.min(a, b)),
    max: n === 0 ? null : rewards.reduce((a, b) => Math.max(a, b)),
    distinct,
    zero_share: round(zeroShare),
    malformed,
    malformed_share: round(malformedShare),
    thresholds: { min_samples: MIN_SAMPLES, min_std: MIN_STD, max_zero_share: MAX_ZERO_SHARE, max_malformed_share: MAX_MALFORMED_SHARE },
    ...(scanned === null
      ? {}
      : typeof scanned === 'string'
        ? { exploit_scan: { skipped: scanned } }
        : {
            exploit_scan: {
              judged: scanned.judged,
              exploits: scanned.exploits,
              rate: scanned.point,
              ci_hi: scanned.hi,
              bound: scanned.bound,
              lines: scanned.lines,
            },
          }),
  };
  // Too few samples say nothing either way about the reward: the check could
  // not run, which leaves the audit undecided rather than failed.
  if (n < MIN_SAMPLES) {
    return notRun(
      'reward_distribution',
      `could not decide: ${n} scored sample${n === 1 ? '' : 's'}, fewer than the ${MIN_SAMPLES} needed to judge the distribution; evaluate more rollouts${
        warnings.length > 0 ? ` (${warnings.join('; ')})` : ''
      }`,
      evidence,
    );
  }
  const score = failures.length > 0 ? clampScore(3 - failures.length) : clampScore(10 - 2 * warnings.length);
  return {
    name: 'reward_distribution',
    status: statusFor(score, failures.length > 0),
    score,
    justification:
      failures.length + warnings.length === 0
        ? `${n} samples, mean ${mean.toFixed(3)}, sd ${std.toFixed(3)}, ${distinct} distinct values, ${(zeroShare * 100).toFixed(0)}% zero`
        : `${n} samples: ${[...failures, ...warnings].join('; ')}`,
    evidence,
  };
}
