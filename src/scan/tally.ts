import { excerpt } from '../audit/record.js';
import { ROLLOUT_KINDS, type Judged, type RolloutKind } from './classify.js';
import { RateAlong } from './rate-along.js';
import type { Rollout } from './read-rollouts.js';
import { SHAPES, type Shape } from './shape.js';

/**
 * What the scan keeps of the rollouts it judged: counts per kind and per
 * shape, the first few of each kind, the rate along the file, and the
 * rollouts whose recorded reward the verifier no longer gives. Bounded
 * whatever the file's length; the rollouts themselves are not kept.
 */

/** Rollouts shown per kind. */
const TOP_PER_KIND = 5;
/** Characters of a completion kept in an example. */
const EXAMPLE_CHARS = 400;
/** A recorded reward further than this from the score now differs. */
const MISMATCH_TOLERANCE = 1e-6;

export interface ScanExample {
  id: string;
  line: number;
  step: number | null;
  shape: Shape;
  kind: RolloutKind;
  answer: string;
  completion: string;
  /** What the run recorded, and what the verifier gives it now under its own gold. */
  recorded: number | null;
  reward: number | null;
  rewarded_under: string[];
  invariant: string | null;
  /** Why a rollout was not judged. */
  error: string | null;
}

export interface ShapeCount {
  shape: Shape;
  rollouts: number;
  exploits: number;
  false_accepts: number;
  rate: number;
}

export class ScanTally {
  readonly counts: Record<RolloutKind, number> = Object.fromEntries(ROLLOUT_KINDS.map((kind) => [kind, 0])) as Record<RolloutKind, number>;
  private readonly shapes = new Map<Shape, Omit<ShapeCount, 'shape' | 'rate'>>();
  readonly top: Record<RolloutKind | 'mismatch', ScanExample[]> = Object.fromEntries(
    [...ROLLOUT_KINDS, 'mismatch'].map((kind) => [kind, []]),
  ) as unknown as Record<RolloutKind | 'mismatch', ScanExample[]>;
  readonly along = new RateAlong();
  rollouts = 0;
  mismatches = 0;
  /** The first failure's message, to say why rollouts could not be judged. */
  firstError: string | null = null;

  add(rollout: Rollout, judged: Judged, reward: number | null, error: string | null): void {
    this.rollouts += 1;
    this.counts[judged.kind] += 1;
    if (judged.kind === 'error') this.firstError ??= error;
    else {
      const shape = this.shapes.get(judged.shape) ?? { rollouts: 0, exploits: 0, false_accepts: 0 };
      shape.rollouts += 1;
      if (judged.kind === 'exploit') shape.exploits += 1;
      if (judged.kind === 'false_accept') shape.false_accepts += 1;
      this.shapes.set(judged.shape, shape);
      this.along.add(rollout.step, judged.kind === 'exploit');
    }
    const example = (): ScanExample => ({
      id: rollout.id,
      line: rollout.line,
      step: rollout.step,
      shape: judged.shape,
      kind: judged.kind,
      answer: rollout.answer,
      completion: excerpt(rollout.completion, EXAMPLE_CHARS),
      recorded: rollout.recorded,
      reward,
      rewarded_under: judged.rewardedUnder,
      invariant: judged.invariant,
      error: judged.kind === 'error' ? error : null,
    });
    keep(this.top[judged.kind], judged.rewardedUnder.length, example);
    if (rollout.recorded !== null && reward !== null && Math.abs(rollout.recorded - reward) > MISMATCH_TOLERANCE) {
      this.mismatches += 1;
      keep(this.top.mismatch, Math.abs(rollout.recorded - reward), example);
    }
  }

  /** Judged rollouts: every one but the errors. */
  get judged(): number {
    return this.rollouts - this.counts.error;
  }

  shapeCounts(): ShapeCount[] {
    return SHAPES.filter((shape) => this.shapes.has(shape)).map((shape) => {
      const count = this.shapes.get(shape)!;
      return { shape, ...count, rate: Math.round((count.exploits / count.rollouts) * 10_000) / 10_000 };
    });
  }
}

/**
 * Keep the TOP_PER_KIND highest-ranked examples, the earliest first on a
 * tie (rollouts arrive in file order); the example is built only when kept.
 */
const ranks = new WeakMap<ScanExample, number>();

function keep(list: ScanExample[], rank: number, build: () => ScanExample): void {
  if (list.length >= TOP_PER_KIND && rank <= ranks.get(list.at(-1)!)!) return;
  const example = build();
  ranks.set(example, rank);
  const at = list.findIndex((other) => rank > ranks.get(other)!);
  if (at < 0) list.push(example);
  else list.splice(at, 0, example);
  if (list.length > TOP_PER_KIND) list.pop();
}
