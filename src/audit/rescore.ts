import { makeRng } from './answer-values.js';
import type { CallQueue, EvalRequest, EvalResult, VerifierSession } from '../calls.js';
import { mayHaveMetOwnLimit } from './slow-calls.js';

/**
 * A reward is a function of its inputs, or the audit proves nothing about
 * production: a verifier that counts calls, or that is strict only while it
 * believes it is audited, can answer the audit one way and training another.
 * Calls go out in a seeded order (so no verifier can count on the first call
 * being the bare gold), and at the end a sample of the audited calls is
 * scored again, by the warm workers and by a fresh process. Any reward that
 * changed is reported.
 */

const SAMPLE_SIZE = 48;

/**
 * The fresh process opens on the longest attack of the whole audit up to this
 * size: training completions run to thousands of characters, and a verifier
 * that is strict only while its process opens on something shorter must meet
 * one here. Longer ones are the slow-input probes, which a slow verifier
 * would spend the opening call on.
 */
const OPENING_MAX_CHARS = 8192;

/**
 * Calls in a seeded order, drawn from the evaluation's key; results come
 * back in request order.
 */
export async function evaluateShuffled(
  requests: readonly EvalRequest[],
  seed: number,
  key: string,
  run: (shuffled: EvalRequest[]) => Promise<EvalResult[]>,
): Promise<EvalResult[]> {
  if (requests.length < 2) return run([...requests]);
  const order = requests.map((_, index) => index);
  const rng = makeRng(seed, 'call-order', key);
  for (let index = order.length - 1; index > 0; index -= 1) {
    const other = Math.floor(rng() * (index + 1));
    const swapped = order[index]!;
    order[index] = order[other]!;
    order[other] = swapped;
  }
  const shuffled = await run(order.map((index) => requests[index]!));
  const results = new Array<EvalResult>(requests.length);
  order.forEach((original, position) => {
    results[original] = shuffled[position]!;
  });
  return results;
}

/**
 * The re-check's verdict: calls whose reward changed, and among them those
 * where a time limit of the verifier's own expired, or may have, in one of
 * the two calls compared (even when run again alone): a reward that depends on how fast
 * the machine is, told apart from one that changes by itself.
 */
export interface RecheckOutcome {
  changed: number;
  total: number;
  example: string | null;
  timing?: { changed: number; completion: string; scores: [number | string, number | string] } | null;
}

interface Kept {
  request: EvalRequest;
  reward: number;
  /** A time limit of the verifier's own expired, or may have, in the audited call (see mayHaveMetOwnLimit). */
  ownTimer: boolean;
  /** The seeded draw that ranks it: the sample is the SAMPLE_SIZE lowest. */
  rank: number;
  /** Breaks a tie between two equal draws, the same way every run. */
  tie: string;
}

/**
 * A deterministic sample of the calls that returned a reward: each call
 * draws a number seeded by its evaluation's key and its index in it, and the
 * lowest draws are kept. Every scored call is equally likely to be kept, and
 * the sample does not depend on the order in which evaluations finish.
 */
export class RescoreSample {
  private readonly kept: Kept[] = [];
  /** Index of the highest draw kept: the one a lower draw replaces. */
  private highest = -1;
  /** The fresh process's first call (see OPENING_MAX_CHARS), with the reward the audit gave it. */
  private opening: Kept | null = null;

  constructor(private readonly seed: number) {}

  add(key: string, requests: readonly EvalRequest[], results: readonly EvalResult[]): void {
    const rng = makeRng(this.seed, 'rescore', key);
    results.forEach((result, index) => {
      const rank = rng();
      if (result.status !== 'ok' || result.reward === null) return;
      this.considerOpening(key, index, requests[index]!, result, rank);
      const full = this.kept.length === SAMPLE_SIZE;
      // Most draws lose to the highest kept on the number alone: no tie-breaker is made for them.
      if (full && rank > this.kept[this.highest]!.rank) return;
      const tie = `${key}#${index}`;
      if (full && !before(rank, tie, this.kept[this.highest]!)) return;
      const entry = { request: requests[index]!, reward: result.reward, ownTimer: mayHaveMetOwnLimit(result), rank, tie };
      if (full) this.kept[this.highest] = entry;
      else this.kept.push(entry);
      this.highest = 0;
      for (let slot = 1; slot < this.kept.length; slot += 1)
        if (before(this.kept[this.highest]!.rank, this.kept[this.highest]!.tie, this.kept[slot]!)) this.highest = slot;
    });
  }

  get size(): number {
    return this.kept.length;
  }

  private considerOpening(key: string, index: number, request: EvalRequest, result: EvalResult, rank: number): void {
    const length = request.completion.length;
    if (!ATTACK_KEY.test(key) || length > OPENING_MAX_CHARS) return;
    const tie = `${key}#${index}`;
    const current = this.opening;
    if (current && (length < current.request.completion.length || (length === current.request.completion.length && !before(rank, tie, current)))) return;
    this.opening = { request, reward: result.reward!, ownTimer: mayHaveMetOwnLimit(result), rank, tie };
  }

  /**
   * Score the sample again in `calls` and in `fresh`, a worker that has seen no
   * call (opened ahead, so its start overlaps the audit; this ends it); the
   * calls whose reward changed.
   */
  async recheck(
    calls: CallQueue,
    fresh: Promise<VerifierSession>,
    observe: (requests: readonly EvalRequest[], results: readonly EvalResult[]) => void = () => undefined,
    alone: (request: EvalRequest) => Promise<EvalResult> = async (request) => (await calls.evaluate([request], { stopOnTimeout: true }))[0]!,
  ): Promise<RecheckOutcome> {
    if (this.kept.length === 0) return { changed: 0, total: 0, example: null, timing: null };
    const sorted = [...this.kept].sort((a, b) => (before(a.rank, a.tie, b) ? -1 : 1));
    // The opening call is compared like the sample's, by the fresh process only.
    const sample = this.opening && !sorted.includes(this.opening) ? [...sorted, this.opening] : sorted;
    const requests = sample.map((entry) => entry.request);
    const expected = sample.map((entry) => entry.reward);
    const freshIndices = freshOpening(sample);
    const freshOrder = freshIndices.map((index) => requests[index]!);
    // The two passes share no process, so neither can see the other's calls;
    // the warm one goes to one worker, as the fresh one does.
    const [warm, freshScored] = await Promise.all([calls.evaluate(requests, { stopOnTimeout: true, oneBatch: true }), scoreFresh(fresh, freshOrder)]);
    observe(requests, warm);
    observe(freshOrder, freshScored);
    const freshResults = new Array<EvalResult>(requests.length);
    freshIndices.forEach((index, position) => {
      freshResults[index] = freshScored[position]!;
    });
    let changed = 0;
    let example: string | null = null;
    let timing: NonNullable<RecheckOutcome['timing']> | null = null;
    for (const [index, request] of requests.entries()) {
      for (let result of [warm[index]!, freshResults[index]!]) {
        // A slow moment is the call timeout's business (the audit re-runs a
        // timeout before it counts), not evidence of a changed reward.
        if (result.status === 'skipped' || result.status === 'timeout') continue;
        if (result.status === 'ok' && result.reward === expected[index]) continue;
        // A time limit of the verifier's own that expired on a busy moment
        // is given the same second chance as the audited calls had.
        if (mayHaveMetOwnLimit(result)) {
          const again = await alone(request);
          if (again.status === 'skipped' || again.status === 'timeout') continue;
          result = again;
          if (result.status === 'ok' && result.reward === expected[index]) continue;
        }
        const then = result.status === 'ok' ? result.reward! : result.status;
        if (sample[index]!.ownTimer || mayHaveMetOwnLimit(result)) {
          if (timing) timing.changed += 1;
          else timing = { changed: 1, completion: request.completion.slice(0, 60), scores: [expected[index]!, then] };
        } else {
          changed += 1;
          example ??= `${JSON.stringify(request.completion.slice(0, 60))} scored ${expected[index]} in the audit, then ${String(then)}`;
        }
        break;
      }
    }
    return { changed, total: requests.length, example, timing };
  }
}

const ATTACK_KEY = / attack$/;

/**
 * The fresh process's order (indices into the sample): the sample reversed, opening on the longest
 * completion an attack sent. An audit's workers open on a row's calibration
 * (short golds); a training run opens on a long completion. A verifier
 * that is strict only when its process opens on a short completion is
 * strict in the audit's workers and lenient here, and the reward it
 * changes is reported.
 */
function freshOpening(sample: readonly Kept[]): number[] {
  const order = sample.map((_, index) => index).reverse();
  let opening = -1;
  order.forEach((index, position) => {
    const entry = sample[index]!;
    if (!/ attack#/.test(entry.tie)) return;
    if (opening < 0 || entry.request.completion.length > sample[order[opening]!]!.request.completion.length) opening = position;
  });
  if (opening > 0) order.unshift(...order.splice(opening, 1));
  return order;
}

async function scoreFresh(opening: Promise<VerifierSession>, requests: readonly EvalRequest[]): Promise<EvalResult[]> {
  const session = await opening;
  try {
    return await session.evaluate(requests, { stopOnTimeout: true });
  } finally {
    // Its end (the process, then its directory) is awaited by whoever opened
    // it, alongside the queue's: the decision does not wait on it.
    session.close().catch(() => undefined);
  }
}

function before(rank: number, tie: string, other: Kept): boolean {
  return rank < other.rank || (rank === other.rank && tie < other.tie);
}
