import { makeRng } from './answer-values.js';
import type { EvalRequest, EvalResult, VerifierSession } from '../runtime/python-session.js';
import type { WorkerPool } from '../runtime/worker-pool.js';

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
 * Calls in a seeded order; results come back in request order. With
 * `blocks` (lengths of consecutive groups), calls are shuffled within each
 * group only, so a group still goes out before the next: calibration keeps
 * its rows in order, and the audit stops at a timeout in the row it belongs to.
 */
export async function evaluateShuffled(
  requests: readonly EvalRequest[],
  seed: number,
  batch: number,
  run: (shuffled: EvalRequest[]) => Promise<EvalResult[]>,
  blocks: readonly number[] = [requests.length],
): Promise<EvalResult[]> {
  if (requests.length < 2) return run([...requests]);
  const order = requests.map((_, index) => index);
  const rng = makeRng(seed, 'call-order', batch);
  let start = 0;
  for (const length of blocks) {
    for (let index = start + length - 1; index > start; index -= 1) {
      const other = start + Math.floor(rng() * (index - start + 1));
      const swapped = order[index]!;
      order[index] = order[other]!;
      order[other] = swapped;
    }
    start += length;
  }
  const shuffled = await run(order.map((index) => requests[index]!));
  const results = new Array<EvalResult>(requests.length);
  order.forEach((original, position) => {
    results[original] = shuffled[position]!;
  });
  return results;
}

/** A deterministic sample of the calls that returned a reward. */
export class RescoreSample {
  private readonly kept: { request: EvalRequest; reward: number }[] = [];
  private seen = 0;

  constructor(private readonly seed: number) {}

  add(requests: readonly EvalRequest[], results: readonly EvalResult[]): void {
    const rng = makeRng(this.seed, 'rescore', this.seen);
    results.forEach((result, index) => {
      if (result.status !== 'ok' || result.reward === null) return;
      this.seen += 1;
      // Reservoir sampling: every scored call is equally likely to be kept.
      if (this.kept.length < SAMPLE_SIZE) this.kept.push({ request: requests[index]!, reward: result.reward });
      else {
        const slot = Math.floor(rng() * this.seen);
        if (slot < SAMPLE_SIZE) this.kept[slot] = { request: requests[index]!, reward: result.reward };
      }
    });
  }

  get size(): number {
    return this.kept.length;
  }

  /**
   * Score the sample again in `pool` and in `fresh`, a worker that has seen no
   * call (opened ahead, so its start overlaps the audit; this ends it); the
   * calls whose reward changed.
   */
  async recheck(pool: WorkerPool, fresh: Promise<VerifierSession>): Promise<{ changed: number; total: number; example: string | null }> {
    if (this.kept.length === 0) return { changed: 0, total: 0, example: null };
    const requests = this.kept.map((entry) => entry.request).reverse();
    const expected = this.kept.map((entry) => entry.reward).reverse();
    // The two passes share no process, so neither can see the other's calls.
    const [warm, freshResults] = await Promise.all([pool.evaluate(requests, { stopOnTimeout: true }), scoreFresh(fresh, [...requests].reverse())]);
    freshResults.reverse();
    let changed = 0;
    let example: string | null = null;
    requests.forEach((request, index) => {
      for (const result of [warm[index]!, freshResults[index]!]) {
        // A slow moment is the call timeout's business (the audit re-runs a
        // timeout before it counts), not evidence of a changed reward.
        if (result.status === 'skipped' || result.status === 'timeout') continue;
        if (result.status !== 'ok' || result.reward !== expected[index]) {
          changed += 1;
          example ??= `${JSON.stringify(request.completion.slice(0, 60))} scored ${expected[index]} in the audit, then ${result.status === 'ok' ? String(result.reward) : result.status}`;
          break;
        }
      }
    });
    return { changed, total: requests.length, example };
  }
}

async function scoreFresh(opening: Promise<VerifierSession>, requests: readonly EvalRequest[]): Promise<EvalResult[]> {
  const session = await opening;
  try {
    return await session.evaluate(requests, { stopOnTimeout: true });
  } finally {
    await session.close();
  }
}
