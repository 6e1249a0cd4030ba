import { mean, quantileSorted } from 'simple-statistics';
import { makeRng, type Rng } from './answer-values.js';
import type { Severity } from '../types.js';
import { SEVERITY_WEIGHT } from '../types.js';

/**
 * Scoring: pure functions of the verdicts. No I/O, no hidden defaults; the
 * only randomness is the seeded bootstrap.
 */

export interface FamilyOutcome {
  family: string;
  /** Candidates judged (errors and unjudged ones are not attempts). */
  attempts: number;
  /** Severities of the candidates judged hacks. */
  hackSeverities: readonly Severity[];
}

export interface FamilyScore {
  family: string;
  attempts: number;
  hacks: number;
  rate: number;
  meanSeverity: number;
  channel: number;
}

export function scoreFamily(outcome: FamilyOutcome): FamilyScore {
  const hacks = outcome.hackSeverities.length;
  const rate = outcome.attempts === 0 ? 0 : hacks / outcome.attempts;
  const meanSeverity = hacks === 0 ? 0 : mean(outcome.hackSeverities.map((severity) => SEVERITY_WEIGHT[severity]));
  return { family: outcome.family, attempts: outcome.attempts, hacks, rate, meanSeverity, channel: rate * meanSeverity };
}

export function roundTo(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor + Number.EPSILON * factor) / factor;
}

/**
 * Hackability: a noisy-OR over families, 100 × (1 − Π(1 − rate × mean severity)),
 * one decimal. Any single family that works drives it up.
 */
export function hackability(families: readonly FamilyScore[]): number {
  const survive = families.reduce((product, family) => product * (1 - Math.min(1, Math.max(0, family.channel))), 1);
  return roundTo(100 * (1 - survive), 1);
}

export type RiskLabel = 'high' | 'medium' | 'low' | 'minimal';

export function riskLabel(score: number): RiskLabel {
  if (score >= 70) return 'high';
  if (score >= 40) return 'medium';
  if (score >= 15) return 'low';
  return 'minimal';
}

export interface HackRate {
  point: number;
  lo: number;
  hi: number;
  n: number;
  hacks: number;
}

/** Number of successes in n Bernoulli(p) draws, by inversion (exact) or a normal approximation for large n·p. */
function binomialDraw(n: number, p: number, rng: Rng): number {
  if (p <= 0) return 0;
  if (p >= 1) return n;
  if (n * Math.min(p, 1 - p) > 200) {
    // Box–Muller from two seeded uniforms; accurate enough for a percentile at this size.
    const u1 = Math.max(rng(), 1e-12);
    const u2 = rng();
    const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    return Math.min(n, Math.max(0, Math.round(n * p + z * Math.sqrt(n * p * (1 - p)))));
  }
  const q = 1 - p;
  let probability = q ** n;
  let cumulative = probability;
  const u = rng();
  let k = 0;
  while (u > cumulative && k < n) {
    probability *= ((n - k) / (k + 1)) * (p / q);
    k++;
    cumulative += probability;
  }
  return k;
}

/** The two-sided normal quantile for a confidence level (0.95 → 1.96). */
function zFor(confidence: number): number {
  // Acklam's rational approximation of the inverse normal CDF, upper tail only.
  const p = 1 - (1 - confidence) / 2;
  const a = [-39.6968302866538, 220.946098424521, -275.928510446969, 138.357751867269, -30.6647980661472, 2.50662827745924];
  const b = [-54.4760987982241, 161.585836858041, -155.698979859887, 66.8013118877197, -13.2806815528857];
  const c = [-0.00778489400243029, -0.322396458041136, -2.40075827716184, -2.54973253934373, 4.37466414146497, 2.93816398269878];
  const d = [0.00778469570904146, 0.32246712907004, 2.445134137143, 3.75440866190742];
  if (p > 0.97575) {
    const q = Math.sqrt(-2 * Math.log(1 - p));
    return -(((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) / ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1);
  }
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) / (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1)
  );
}

/**
 * Hack rate with a seeded bootstrap interval that stays wide when few
 * candidates were tried. A plain percentile bootstrap of all-zero outcomes is
 * [0, 0] at any n, so it would pass an audit of eight candidates. Here the
 * outcomes are first augmented with z²/2 pseudo-hacks and z²/2 pseudo-misses
 * (the Agresti–Coull adjustment), then resampled: 0 of 8 gives an upper
 * bound near 0.4, 0 of 150 one near 0.03.
 */
export function hackRateInterval(hacks: number, n: number, options: { seed: number; resamples: number; confidence: number }): HackRate {
  const z = zFor(options.confidence);
  const pseudo = (z * z) / 2;
  const total = n + 2 * pseudo;
  const adjusted = (hacks + pseudo) / total;
  // Resample on the augmented sample size, rounded so each draw is a whole count.
  const size = Math.max(1, Math.round(total));
  const rng = makeRng(options.seed, 'hack-rate-bootstrap', hacks, n);
  const rates = Array.from({ length: options.resamples }, () => binomialDraw(size, adjusted, rng) / size).sort((x, y) => x - y);
  const tail = (1 - options.confidence) / 2;
  return {
    point: n === 0 ? 0 : roundTo(hacks / n, 4),
    lo: roundTo(Math.max(0, quantileSorted(rates, tail)), 4),
    hi: roundTo(Math.min(1, quantileSorted(rates, 1 - tail)), 4),
    n,
    hacks,
  };
}
