import {
  skippedResult,
  type CallQueue,
  type EvalRequest,
  type EvalResult,
  type ExecutorInfo,
  type QueueOptions,
  type VerifierInfo,
  type VerifierSession,
} from '../calls.js';
import { openVerifierSession } from './python-session.js';
import { Evaluation } from './pool-evaluation.js';
import { GoldLedger } from './ray/gold-ledger.js';
import { RayBackend, type RayOptions, type RayPlacement } from './ray/ray-backend.js';
import type { SessionOptions } from './session-options.js';

/**
 * A pool of verifier sessions sharing one queue. Every evaluation handed to
 * the pool joins the queue, first come first served, and each worker takes
 * the next batch from it as soon as it has room: several evaluations run at
 * once (the gate audits many rows side by side), so no worker sits idle while
 * another has work queued, and a batch may hold the calls of several
 * evaluations. Each result is written back at its request's index, so the
 * merged results do not depend on the number of workers.
 *
 * On a Ray cluster there is one worker per actor, and each serves the calls
 * of its own golds (a slot: a hash of the gold over the actors), so that a
 * gold's calibration and the calls judged against it run on one node.
 */

export interface PoolOptions extends SessionOptions {
  /** Upper bound on worker processes. */
  workers: number;
  /** Requests per batch handed to one worker. */
  batchSize?: number;
  /** Run the workers on a Ray cluster's actors instead of here (see ray/ray-backend.ts). */
  ray?: RayOptions;
  /** Told each Ray actor lost during the run (its calls run again on another). */
  onActorLost?: (actor: string, reason: string) => void;
}

/**
 * How long a batch's calls should take. Each batch costs Node a round of
 * encoding, reading, judging and a check of the worker's home, so a slow
 * verifier's audit makes fewer of them; the end of an audit does not wait
 * on a long batch, since batches shrink to shares of what is left.
 */
const BATCH_TARGET_MS = 100;
/**
 * The same, until calls have been timed (a call is guessed at 1 ms): the
 * first batches come back soon, so that the pool learns what a call costs
 * and starts the workers a slow verifier needs.
 */
const FIRST_BATCH_TARGET_MS = 40;

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

/** A batch: slices of one or more evaluations, in the order sent. */
interface Part {
  evaluation: Evaluation;
  indices: number[];
}

export class WorkerPool implements CallQueue {
  private readonly sessions: VerifierSession[] = [];
  private closed = false;
  private meanCallMs: number | undefined;
  /** Workers being started; they take from the queue once ready. */
  private readonly openings: Promise<void>[] = [];
  private pendingOpens = 0;
  /** Requests evaluated so far, and the total the caller expects (see reserve). */
  private evaluated = 0;
  private expectedTotal = 0;
  private openFailure: unknown = null;
  /** A session that failed for good: every evaluation fails with it. */
  private failure: unknown = null;
  private readonly queue: Evaluation[] = [];
  /** Lanes waiting for work. */
  private readonly idle: (() => void)[] = [];
  private startMs = 1;
  private readonly started = performance.now();
  /** Resolves once the first worker is up; rejects if it cannot start. */
  readonly ready: Promise<void>;
  /** The Ray driver the workers are started through, when they run on a cluster. */
  private readonly ray: Promise<RayBackend> | null;
  private rayBackend: RayBackend | null = null;
  /** On a cluster, one per actor (see Evaluation); here, one. */
  private slots = 1;
  /** Each session's placement, on a cluster. */
  private readonly placements = new Map<VerifierSession, RayPlacement>();
  private readonly ledger = new GoldLedger();

  private constructor(private readonly options: PoolOptions) {
    this.ray = options.ray ? RayBackend.connect(options.ray, options.workers) : null;
    this.ray?.then(
      (backend) => {
        this.rayBackend = backend;
        this.slots = Math.max(1, backend.info.actors);
        backend.onLost = options.onActorLost ?? null;
        // The pool holds it until it closes; each session holds it too.
        backend.retain();
      },
      () => undefined,
    );
    this.ready = this.openOne(true);
    this.ready.catch(() => undefined);
  }

  /** A pool whose first worker starts now; `ready` says when it is up. Callers may reserve work before. */
  static start(options: PoolOptions): WorkerPool {
    return new WorkerPool(options);
  }

  static async open(options: PoolOptions): Promise<WorkerPool> {
    const pool = new WorkerPool(options);
    try {
      await pool.ready;
    } catch (error) {
      await pool.close();
      throw error;
    }
    return pool;
  }

  /** The first worker's, once `ready` has resolved. */
  get info(): VerifierInfo {
    return this.upSession().info;
  }

  /** How the workers are isolated (every worker of a pool alike). */
  get isolation(): VerifierSession['isolation'] {
    return this.upSession().isolation;
  }

  private upSession(): VerifierSession {
    const session = this.sessions[0];
    if (!session) throw new Error(this.closed ? 'worker pool is closed' : 'no worker of the pool is up yet');
    return session;
  }

  get size(): number {
    return this.sessions.length;
  }

  /** Where the calls ran: null for this machine. */
  executor(): ExecutorInfo | null {
    const info = this.rayBackend?.info;
    return info ? { ...info, lost: [...info.lost], ...this.ledger.evidence() } : null;
  }

  /** The Ray driver, when the workers run on a cluster (the tests' and the benchmark's fault injection). */
  get rayDriver(): RayBackend | null {
    return this.rayBackend;
  }

  /** A session of its own, started where the pool's are (the audit's fresh process). */
  openSession(options: SessionOptions): Promise<VerifierSession> {
    return this.openPlaced(options).then(({ session }) => session);
  }

  private openPlaced(options: SessionOptions): Promise<{ session: VerifierSession; placement: RayPlacement | null }> {
    if (!this.ray) return openVerifierSession(options).then((session) => ({ session, placement: null }));
    return this.ray.then(async (backend) => {
      const placement = backend.placement();
      return { session: await openVerifierSession(options, placement), placement };
    });
  }

  /**
   * Start enough workers for the work ahead. Callers that know the audit's
   * total size say so, so that even small batches use every worker. New
   * workers start in the background: the running ones keep working, and each
   * new one takes from the queue as soon as it is ready.
   */
  reserve(expectedRequests: number): void {
    this.expectedTotal = this.evaluated + expectedRequests;
    this.grow();
  }

  private get queued(): number {
    let total = 0;
    for (const evaluation of this.queue) total += evaluation.waiting;
    return total;
  }

  private queuedIn(slot: number): number {
    let total = 0;
    for (const evaluation of this.queue) total += evaluation.waitingIn(slot);
    return total;
  }

  private grow(): void {
    if (this.closed || this.failure !== null) return;
    // What the caller said is still to come counts too, so the first calls
    // of an audit, once timed, can already start the workers it will need.
    const expectedRequests = Math.max(this.queued, this.expectedTotal - this.evaluated);
    const byCount = 1 + Math.floor(expectedRequests / MIN_REQUESTS_PER_EXTRA_WORKER);
    // One worker, and one more for each STARTS_PER_EXTRA_WORKER starts of work ahead.
    const byTime = this.meanCallMs === undefined ? 0 : 1 + Math.floor((expectedRequests * this.meanCallMs) / (STARTS_PER_EXTRA_WORKER * this.startMs));
    // On a cluster every slot needs its worker (its golds wait for it), and the actors are there already.
    const wanted = this.ray ? (this.rayBackend ? this.slots : 1) : Math.min(this.options.workers, Math.max(1, byCount, byTime));
    for (let count = this.sessions.length + this.pendingOpens; count < wanted; count += 1) {
      const opening = this.openOne(false);
      opening.catch(() => undefined);
    }
  }

  private openOne(first: boolean): Promise<void> {
    this.pendingOpens += 1;
    const opening = this.openPlaced(this.options).then(
      ({ session, placement }) => {
        this.pendingOpens -= 1;
        if (first) this.startMs = Math.max(performance.now() - this.started, 1);
        if (this.closed) {
          void session.close();
          // Closed before its first worker was up, the pool has none: `ready` must not say otherwise.
          if (first) throw new Error('worker pool is closed');
          return;
        }
        // On a cluster the n-th session serves the n-th slot.
        const slot = this.ray ? this.sessions.length : 0;
        this.sessions.push(session);
        if (placement) this.placements.set(session, placement);
        for (let lane = 0; lane < LANES_PER_WORKER; lane += 1) void this.lane(session, slot);
        if (first) this.grow();
      },
      (error: unknown) => {
        this.pendingOpens -= 1;
        if (first) {
          // No worker will ever take what is queued.
          this.fail(error);
          throw error;
        }
        this.openFailure ??= error;
        // On a cluster its slot's golds have no other worker to run on.
        if (this.ray) this.fail(error);
      },
    );
    this.openings.push(opening.catch(() => undefined));
    return opening;
  }

  evaluate(requests: readonly EvalRequest[], options: QueueOptions = {}): Promise<EvalResult[]> {
    if (this.closed) return Promise.reject(new Error('worker pool is closed'));
    if (this.failure !== null) return Promise.reject(this.failure);
    const evaluation = new Evaluation(requests, options);
    if (requests.length === 0) return Promise.resolve([]);
    this.queue.push(evaluation);
    this.grow();
    for (const wake of this.idle.splice(0)) wake();
    return evaluation.promise;
  }

  /**
   * Batches sized to take about BATCH_TARGET_MS each (FIRST_BATCH_TARGET_MS
   * before any call was timed), from the evaluations first in the queue.
   * Where several workers share the queue, a batch is a share of what is
   * queued, so that they run out of work together; a lone worker has nobody
   * to share with, and takes what is queued in one round trip instead of
   * ever smaller halves of it. On a cluster a worker takes from its own slot
   * only, which it shares with nobody.
   */
  private take(slot: number): Part[] | null {
    const perCall = this.meanCallMs ?? 1;
    const target = this.meanCallMs === undefined ? FIRST_BATCH_TARGET_MS : BATCH_TARGET_MS;
    const split = this.slots > 1;
    const workers = split ? 1 : this.sessions.length + this.pendingOpens;
    const shares = workers > 1 ? LANES_PER_WORKER * workers : 1;
    for (const evaluation of this.queue) evaluation.split(this.slots);
    const first = split ? this.queue.find((evaluation) => evaluation.waitingIn(slot) > 0) : this.queue[0];
    const size =
      this.options.batchSize ??
      (first?.options.oneBatch && first.waitingIn(slot) > 0
        ? first.waitingIn(slot)
        : Math.max(4, Math.min(512, Math.ceil((split ? this.queuedIn(slot) : this.queued) / shares), Math.round(target / Math.max(perCall, 0.01)))));
    const parts: Part[] = [];
    let room = size;
    let at = 0;
    while (room > 0 && at < this.queue.length) {
      const evaluation = this.queue[at]!;
      if (!evaluation.stopped && evaluation.options.cancelled?.()) {
        // stop() takes it out of the queue.
        this.stop(evaluation);
        continue;
      }
      if (evaluation.waiting === 0) {
        this.queue.splice(at, 1);
        this.settle(evaluation);
        continue;
      }
      if (evaluation.waitingIn(slot) === 0) {
        // Another slot's golds: that slot's worker takes them.
        at += 1;
        continue;
      }
      const indices = evaluation.handOut(slot, room);
      room -= indices.length;
      evaluation.inFlight += indices.length;
      parts.push({ evaluation, indices });
    }
    return parts.length > 0 ? parts : null;
  }

  /** A lane of a worker: takes batches while there is work, waits for more otherwise. */
  private async lane(session: VerifierSession, slot: number): Promise<void> {
    const placement = this.placements.get(session);
    while (!this.closed && this.failure === null) {
      const parts = this.take(slot);
      if (!parts) {
        await new Promise<void>((wake) => this.idle.push(wake));
        continue;
      }
      const requests = parts.flatMap(({ evaluation, indices }) => indices.map((index) => evaluation.requests[index]!));
      const placedAt = placement?.history.length ?? 0;
      let results: EvalResult[];
      try {
        results = await session.evaluate(requests, {
          stopOnTimeout: parts.some(({ evaluation }) => evaluation.options.stopOnTimeout),
          cancelled: () => parts.every(({ evaluation, indices }) => evaluation.stopped || indices[0]! > evaluation.cut),
        });
      } catch (error) {
        // Its evaluations may have nothing left in the queue to be failed through.
        for (const { evaluation } of parts) evaluation.reject(error);
        this.fail(error);
        return;
      }
      if (placement) this.ledger.ran(new Set(requests.map((request) => request.answer)), placement.history, placedAt);
      this.observe(results);
      this.evaluated += results.length;
      let offset = 0;
      for (const { evaluation, indices } of parts) {
        this.deliver(evaluation, indices, results.slice(offset, offset + indices.length));
        offset += indices.length;
      }
      // Timed calls tell whether the rest is worth another worker.
      this.grow();
    }
  }

  private deliver(evaluation: Evaluation, indices: readonly number[], results: readonly EvalResult[]): void {
    evaluation.inFlight -= indices.length;
    if (evaluation.options.stopOnTimeout) {
      indices.forEach((index, position) => {
        const status = results[position]!.status;
        if ((status === 'timeout' || status === 'crashed') && index < evaluation.cut) evaluation.cut = index;
      });
    }
    indices.forEach((index, position) => {
      const result = results[position]!;
      // Skipped only because the batch stopped at another evaluation's failure: run it later.
      if (result.status === 'skipped' && !evaluation.stopped && index < evaluation.cut) evaluation.handBack(index);
      else {
        evaluation.results[index] = result;
        evaluation.settled += 1;
      }
    });
    if (evaluation.cut < Number.POSITIVE_INFINITY) evaluation.dropAgain();
    evaluation.options.onProgress?.(evaluation.settled, evaluation.requests.length);
    if (evaluation.waiting > 0 && !this.queue.includes(evaluation)) {
      this.queue.unshift(evaluation);
      for (const wake of this.idle.splice(0)) wake();
    }
    this.settle(evaluation);
  }

  private stop(evaluation: Evaluation): void {
    evaluation.stopped = true;
    evaluation.dropAgain();
    const index = this.queue.indexOf(evaluation);
    if (index >= 0) this.queue.splice(index, 1);
    this.settle(evaluation);
  }

  /** Resolve an evaluation once nothing of it is waiting or running; what never ran, or ran past its cut, is skipped. */
  private settle(evaluation: Evaluation): void {
    if (evaluation.inFlight > 0 || evaluation.waiting > 0) return;
    if (this.openFailure !== null) {
      evaluation.reject(this.openFailure);
      return;
    }
    const { results, cut } = evaluation;
    for (let index = 0; index < results.length; index++) if (index > cut || results[index] === undefined) results[index] = skippedResult();
    evaluation.resolve(results);
  }

  /** A worker failed for good: so does every evaluation, now and later. */
  private fail(error: unknown): void {
    this.failure ??= error;
    for (const evaluation of this.queue.splice(0)) evaluation.reject(this.failure);
    for (const wake of this.idle.splice(0)) wake();
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
    for (const evaluation of this.queue.splice(0)) evaluation.reject(new Error('worker pool is closed'));
    for (const wake of this.idle.splice(0)) wake();
    // A worker still starting is closed as soon as it is up.
    await Promise.allSettled(this.openings);
    await Promise.allSettled(this.sessions.map((session) => session.close()));
    if (this.ray)
      await this.ray.then(
        (backend) => backend.release(),
        () => undefined,
      );
  }
}
