import {
  openVerifierSession,
  type EvalRequest,
  type EvalResult,
  type SessionOptions,
  type VerifierInfo,
  type VerifierSession,
} from './python-session.js';

/**
 * A pool of verifier sessions. Requests are cut into batches handed to
 * whichever worker is free; each result is written back at its request's
 * index, so the merged results do not depend on the number of workers.
 */

export interface PoolOptions extends SessionOptions {
  /** Upper bound on worker processes. */
  workers: number;
  /** Requests per batch handed to one worker. */
  batchSize?: number;
}

export interface EvaluateOptions {
  onProgress?: (done: number, total: number) => void;
  /**
   * Stop once a call timed out or crashed its worker, also within a batch. Either
   * already rejects the verifier, and each further one would cost a full call
   * timeout or a worker restart.
   */
  stopOnTimeout?: boolean;
  batchSize?: number;
}

export const SKIPPED_RESULT: EvalResult = {
  status: 'skipped',
  reward: null,
  rewardType: '',
  nonFinite: null,
  error: null,
  sideEffects: [],
  ms: 0,
};

/** Below this many requests a second worker costs more (a Python start and an import) than it saves. */
const MIN_REQUESTS_PER_EXTRA_WORKER = 1500;

export class WorkerPool {
  private readonly sessions: VerifierSession[];
  private closed = false;

  private constructor(
    private readonly options: PoolOptions,
    first: VerifierSession,
  ) {
    this.sessions = [first];
  }

  static async open(options: PoolOptions): Promise<WorkerPool> {
    return new WorkerPool(options, await openVerifierSession(options));
  }

  get info(): VerifierInfo {
    return this.sessions[0]!.info;
  }

  get size(): number {
    return this.sessions.length;
  }

  private async grow(requestCount: number): Promise<void> {
    const wanted = Math.min(this.options.workers, Math.max(1, Math.floor(requestCount / MIN_REQUESTS_PER_EXTRA_WORKER)));
    if (wanted <= this.sessions.length) return;
    const opened = await Promise.allSettled(
      Array.from({ length: wanted - this.sessions.length }, () => openVerifierSession(this.options)),
    );
    for (const outcome of opened) {
      if (outcome.status === 'fulfilled') this.sessions.push(outcome.value);
    }
    const failure = opened.find((outcome) => outcome.status === 'rejected');
    if (failure && failure.status === 'rejected') throw failure.reason;
  }

  async evaluate(requests: readonly EvalRequest[], options: EvaluateOptions = {}): Promise<EvalResult[]> {
    if (this.closed) throw new Error('worker pool is closed');
    await this.grow(requests.length);
    const batchSize =
      options.batchSize ?? this.options.batchSize ?? Math.max(16, Math.min(2048, Math.ceil(requests.length / (this.sessions.length * 4))));
    const results: EvalResult[] = new Array(requests.length);
    let next = 0;
    let done = 0;
    let stopped = false;
    const work = async (session: VerifierSession): Promise<void> => {
      while (next < requests.length && !stopped) {
        const start = next;
        next = Math.min(requests.length, next + batchSize);
        const batch = await session.evaluate(requests.slice(start, next), { stopOnTimeout: options.stopOnTimeout ?? false });
        batch.forEach((result, offset) => {
          results[start + offset] = result;
        });
        done += batch.length;
        if (options.stopOnTimeout && batch.some((result) => result.status === 'timeout' || result.status === 'crashed')) stopped = true;
        options.onProgress?.(done, requests.length);
      }
    };
    await Promise.all(this.sessions.map(work));
    for (let index = 0; index < results.length; index++) results[index] ??= SKIPPED_RESULT;
    return results;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled(this.sessions.map((session) => session.close()));
  }
}
