import {
  openVerifierSession,
  skippedResult,
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

const BATCH_TARGET_MS = 40;

/**
 * Batches a worker holds at once: the one it runs and the next, sent ahead
 * behind it (see PythonSession.prepare), so it never waits for Node between
 * two batches.
 */
const LANES_PER_WORKER = 2;

/** Below this many requests a second worker costs more (a Python start and an import) than it saves. */
const MIN_REQUESTS_PER_EXTRA_WORKER = 1500;

/**
 * Once calls have been timed, an extra worker pays off when the work ahead
 * takes longer than this many starts of a worker (its Python and its import):
 * a slow verifier earns a second worker on a few hundred calls.
 */
const STARTS_PER_EXTRA_WORKER = 2;

export class WorkerPool {
  private readonly sessions: VerifierSession[];
  private closed = false;
  private meanCallMs: number | undefined;
  /** Workers being started; they join the evaluation under way once ready. */
  private readonly openings: Promise<void>[] = [];
  private pendingOpens = 0;
  /** Requests evaluated so far, and the total the caller expects (see reserve). */
  private evaluated = 0;
  private expectedTotal = 0;
  private openFailure: unknown = null;
  private readonly joiners = new Set<(session: VerifierSession) => void>();

  private constructor(
    private readonly options: PoolOptions,
    first: VerifierSession,
    /** How long the first worker took to start and import the verifier. */
    private readonly startMs: number,
  ) {
    this.sessions = [first];
  }

  static async open(options: PoolOptions): Promise<WorkerPool> {
    const started = performance.now();
    const first = await openVerifierSession(options);
    return new WorkerPool(options, first, performance.now() - started);
  }

  get info(): VerifierInfo {
    return this.sessions[0]!.info;
  }

  /** How the workers are isolated (every worker of a pool alike). */
  get isolation(): VerifierSession['isolation'] {
    return this.sessions[0]!.isolation;
  }

  get size(): number {
    return this.sessions.length;
  }

  /**
   * Start enough workers for the work ahead. Callers that know the audit's
   * total size say so once, so that even small batches use every worker.
   * New workers start in the background: the running ones keep working, and
   * each new one joins the evaluation under way as soon as it is ready.
   */
  reserve(expectedRequests: number): void {
    this.expectedTotal = this.evaluated + expectedRequests;
    this.grow(expectedRequests);
  }

  private grow(aheadInThisEvaluation: number): void {
    if (this.closed) return;
    // What the caller said is still to come counts too, so the first calls
    // of an audit, once timed, can already start the workers it will need.
    const expectedRequests = Math.max(aheadInThisEvaluation, this.expectedTotal - this.evaluated);
    const byCount = Math.floor(expectedRequests / MIN_REQUESTS_PER_EXTRA_WORKER);
    const byTime =
      this.meanCallMs === undefined ? 0 : Math.floor((expectedRequests * this.meanCallMs) / (STARTS_PER_EXTRA_WORKER * Math.max(this.startMs, 1)));
    const wanted = Math.min(this.options.workers, Math.max(1, byCount, byTime));
    for (let count = this.sessions.length + this.pendingOpens; count < wanted; count += 1) {
      this.pendingOpens += 1;
      const opening = openVerifierSession(this.options).then(
        (session) => {
          this.pendingOpens -= 1;
          if (this.closed) return session.close();
          this.sessions.push(session);
          for (const join of this.joiners) join(session);
        },
        (error: unknown) => {
          this.pendingOpens -= 1;
          this.openFailure ??= error;
        },
      );
      this.openings.push(opening);
    }
  }

  async evaluate(requests: readonly EvalRequest[], options: EvaluateOptions = {}): Promise<EvalResult[]> {
    if (this.closed) throw new Error('worker pool is closed');
    this.grow(requests.length);
    // Batches sized to take about BATCH_TARGET_MS each: large enough that the
    // round trip per batch is noise for a fast verifier, small enough that no
    // worker sits idle long while another finishes the last batch of a slow one.
    const perCall = this.meanCallMs ?? 1;
    const batchSize =
      options.batchSize ??
      this.options.batchSize ??
      Math.max(4, Math.min(512, Math.ceil(requests.length / (LANES_PER_WORKER * this.sessions.length)), Math.round(BATCH_TARGET_MS / Math.max(perCall, 0.01))));
    const results: EvalResult[] = new Array(requests.length);
    let next = 0;
    let done = 0;
    let stopped = false;
    const work = async (session: VerifierSession): Promise<void> => {
      while (next < requests.length && !stopped) {
        const start = next;
        next = Math.min(requests.length, next + batchSize);
        const batch = await session.evaluate(requests.slice(start, next), { stopOnTimeout: options.stopOnTimeout ?? false, cancelled: () => stopped });
        this.observe(batch);
        this.evaluated += batch.length;
        // Timed calls tell whether the rest is worth another worker.
        this.grow(requests.length - next);
        batch.forEach((result, offset) => {
          results[start + offset] = result;
        });
        done += batch.length;
        if (options.stopOnTimeout && batch.some((result) => result.status === 'timeout' || result.status === 'crashed')) stopped = true;
        options.onProgress?.(done, requests.length);
      }
    };
    const loops: Promise<void>[] = [];
    const join = (session: VerifierSession): void => {
      for (let lane = 0; lane < LANES_PER_WORKER; lane += 1) {
        if (next >= requests.length || stopped) return;
        const loop = work(session);
        loop.catch(() => undefined);
        loops.push(loop);
      }
    };
    this.joiners.add(join);
    try {
      for (const session of this.sessions) join(session);
      // Workers that join while others run add loops to wait for.
      for (let waited = 0; waited < loops.length; ) {
        const current = loops.slice(waited);
        waited = loops.length;
        await Promise.all(current);
      }
    } finally {
      this.joiners.delete(join);
    }
    if (this.openFailure !== null) throw this.openFailure;
    for (let index = 0; index < results.length; index++) results[index] ??= skippedResult();
    return results;
  }

  /**
   * Evaluate in a new worker process that has seen no call before, then end
   * it: what a fresh process scores is what training's first calls get.
   */
  async evaluateFresh(requests: readonly EvalRequest[]): Promise<EvalResult[]> {
    if (this.closed) throw new Error('worker pool is closed');
    const session = await openVerifierSession(this.options);
    try {
      return await session.evaluate(requests, { stopOnTimeout: true });
    } finally {
      await session.close();
    }
  }

  /** Running mean of the time one call takes, from the results' own timings. */
  private observe(batch: readonly EvalResult[]): void {
    let total = 0;
    let count = 0;
    for (const result of batch) {
      if (result.status !== 'ok') continue;
      total += result.ms;
      count += 1;
    }
    if (count === 0) return;
    const mean = total / count;
    this.meanCallMs = this.meanCallMs === undefined ? mean : 0.7 * this.meanCallMs + 0.3 * mean;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // A worker still starting is closed as soon as it is up.
    await Promise.allSettled(this.openings);
    await Promise.allSettled(this.sessions.map((session) => session.close()));
  }
}
