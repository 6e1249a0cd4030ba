import { createHash } from 'node:crypto';
import type { CallQueue, EvalRequest, EvalResult, QueueOptions, VerifierInfo, VerifierSession } from '../calls.js';

/**
 * Score once, read every reward. Every call an environment audit makes asks
 * the shim for the weighted total and each audited reward from the same
 * scoring (python/env_shim.py), and its result is kept here, by request. A
 * reward's gate then runs exactly as it would on its own, but reads its
 * value from the calls already made: only a request no gate has sent yet
 * (a format the reward accepts and the total does not, its own re-check
 * sample) goes to the workers, once, for every gate after it.
 *
 * A request a gate sends again (a re-run after a timeout, the re-check's
 * warm pass) is a new call, not the first one's echo: the k-th time a gate
 * sends a request it reads the k-th time that request was scored, by any
 * gate, and scores it when there is none. Each gate therefore sees the
 * same sequence of results it would see scoring alone, as long as the
 * environment scores a completion the same way each time (which the
 * re-check tests). Calls in a fresh process are kept apart from the warm
 * workers' calls, the same way.
 */

/** What the shim reads to know which reward a request is for, and which rewards to read beside it. */
const REWARD_KEY = 'gatekept_reward';
const REWARDS_KEY = 'gatekept_rewards';

/** How many calls were made and how many read from another gate's, for the record's timing. */
export interface ScoringCounts {
  /** Calls the warm workers scored. */
  scored: number;
  /** Calls a gate read from one already scored instead of scoring again. */
  read: number;
  /** Calls fresh processes scored, and those read from one. */
  freshScored: number;
  freshRead: number;
  /** Fresh processes started for the re-checks. */
  freshProcesses: number;
}

/** The request as one gate sends it, with the reward names the shim should read beside the one asked for. */
function asked(request: EvalRequest, reward: string | null, names: readonly string[]): EvalRequest {
  return { ...request, info: { ...request.info, [REWARD_KEY]: reward, ...(names.length > 0 ? { [REWARDS_KEY]: [...names] } : {}) } };
}

/** A request's identity whichever gate sends it (its reward left out); hashed so that long attacks are not kept twice. */
function keyOf(request: EvalRequest): string {
  const info: Record<string, unknown> = { ...request.info };
  delete info[REWARD_KEY];
  delete info[REWARDS_KEY];
  return createHash('sha256')
    .update(JSON.stringify([request.completion, request.answer, request.prompt ?? null, info]))
    .digest('base64');
}

/** One reward's result from a call that scored them all: the call's own for the total, or for a call that produced nothing. */
export function resultFor(result: EvalResult, reward: string | null): EvalResult {
  const { rewards, ...call } = result;
  if (reward === null || call.status !== 'ok') return call;
  const value = rewards?.[reward];
  if (value === undefined) {
    // The shim reads every name it is asked for: a missing one is the worker's fault, and says so.
    return {
      ...call,
      status: 'raised',
      reward: null,
      rewardType: '',
      nonFinite: null,
      error: { type: 'RuntimeError', message: `reward ${reward} was not read` },
    };
  }
  if ('error' in value) return { ...call, status: 'raised', reward: null, rewardType: '', nonFinite: null, error: value.error };
  return { ...call, reward: value.reward, rewardType: value.rewardType, nonFinite: value.nonFinite };
}

/** Results of one kind of call (warm or fresh) by request, in the order each was scored. */
class Ledger {
  private readonly scored = new Map<string, EvalResult[]>();

  get(key: string, slot: number): EvalResult | undefined {
    return this.scored.get(key)?.[slot];
  }

  put(key: string, slot: number, result: EvalResult): void {
    // A call never made (skipped) leaves its slot open for the next gate to score.
    if (result.status === 'skipped') return;
    const list = this.scored.get(key) ?? [];
    if (list.length === 0) this.scored.set(key, list);
    list[slot] ??= result;
  }
}

/** One reader's place in a ledger: how many times it has sent each request. */
class Reader {
  private readonly sent = new Map<string, number>();

  slot(key: string): number {
    const slot = this.sent.get(key) ?? 0;
    this.sent.set(key, slot + 1);
    return slot;
  }
}

export class ScoreBook {
  private readonly warm = new Ledger();
  private readonly fresh = new Ledger();
  readonly counts: ScoringCounts = { scored: 0, read: 0, freshScored: 0, freshRead: 0, freshProcesses: 0 };

  /** `names`: the rewards every call reads beside the total (none when the total is the only gate). */
  constructor(private readonly names: readonly string[]) {}

  /**
   * Score `requests` for `reward` as `reader` sends them: read what is in the
   * ledger, send the rest through `send` (asking for every reward), keep
   * what comes back. Results in request order.
   */
  private async score(
    ledger: Ledger,
    reader: Reader,
    reward: string | null,
    requests: readonly EvalRequest[],
    send: (requests: EvalRequest[], onProgress?: (done: number, total: number) => void) => Promise<EvalResult[]>,
    fresh: boolean,
    onProgress?: (done: number, total: number) => void,
  ): Promise<EvalResult[]> {
    const results = new Array<EvalResult>(requests.length);
    const missing: { index: number; key: string; slot: number }[] = [];
    // A reward the calls do not read beside the total is scored by calls of its own.
    const own = reward !== null && !this.names.includes(reward) ? `${reward}\n` : '';
    // Such a call returns the reward asked for, as the total's returns the total.
    const read = (result: EvalResult) => resultFor(result, own ? null : reward);
    requests.forEach((request, index) => {
      const key = own + keyOf(request);
      const slot = reader.slot(key);
      const kept = ledger.get(key, slot);
      if (kept) results[index] = read(kept);
      else missing.push({ index, key, slot });
    });
    const found = requests.length - missing.length;
    if (fresh) this.counts.freshRead += found;
    else this.counts.read += found;
    if (found > 0) onProgress?.(found, requests.length);
    if (missing.length === 0) return results;
    const progress = onProgress ? (done: number) => onProgress(found + done, requests.length) : undefined;
    const scored = await send(
      missing.map(({ index }) => asked(requests[index]!, reward, this.names)),
      progress,
    );
    missing.forEach(({ index, key, slot }, position) => {
      const result = scored[position]!;
      if (result.status !== 'skipped') {
        if (fresh) this.counts.freshScored += 1;
        else this.counts.scored += 1;
      }
      ledger.put(key, slot, result);
      results[index] = read(result);
    });
    return results;
  }

  /** The shared workers as one gate sees them: its reward read from every call; closing it leaves them running. */
  queue(pool: CallQueue, reward: string | null, options: { reserve: boolean }): CallQueue {
    const reader = new Reader();
    return {
      get info(): VerifierInfo {
        return pool.info;
      },
      get isolation() {
        return pool.isolation;
      },
      get ready() {
        return pool.ready;
      },
      executor: () => pool.executor?.() ?? null,
      // A gate after the first reads most of its calls: its estimate of the calls ahead would start workers for nothing.
      reserve: (expected: number) => {
        if (options.reserve) pool.reserve(expected);
      },
      evaluate: (requests: readonly EvalRequest[], queueOptions?: QueueOptions) =>
        this.score(
          this.warm,
          reader,
          reward,
          requests,
          (sent, onProgress) => pool.evaluate(sent, { ...queueOptions, ...(onProgress ? { onProgress } : {}) }),
          false,
          queueOptions?.onProgress,
        ),
      // The workers serve the next gate; whoever opened them ends them.
      close: async () => undefined,
    };
  }

  /**
   * A fresh process as one gate's re-check sees it: what a fresh process
   * scored already is read, the rest is scored by `open()`'s session (opened
   * on the first such call). `ownsSession`: closing this closes that session.
   */
  freshSession(
    open: () => Promise<VerifierSession>,
    reward: string | null,
    info: VerifierInfo,
    isolation: 'bwrap' | 'none',
    ownsSession: boolean,
  ): VerifierSession {
    const reader = new Reader();
    let session: Promise<VerifierSession> | null = null;
    const opened = () => {
      session ??= open();
      return session;
    };
    return {
      info,
      isolation,
      evaluate: (requests, evaluateOptions) =>
        this.score(this.fresh, reader, reward, requests, async (sent) => (await opened()).evaluate(sent, evaluateOptions), true),
      close: async () => {
        if (ownsSession && session) await (await session).close();
      },
    };
  }

  /** A fresh process was started. */
  startedFresh(): void {
    this.counts.freshProcesses += 1;
  }
}
