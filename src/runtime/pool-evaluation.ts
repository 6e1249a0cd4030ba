import type { EvalRequest, EvalResult, QueueOptions } from '../calls.js';
import { slotOfGold } from './ray/gold-ledger.js';

/**
 * One evaluation in the queue: its requests, the results so far, and what is
 * still to hand out, per slot. Here there is one slot, every request's; on a
 * Ray cluster each actor's session has one, holding the requests of the
 * golds it serves (see gold-ledger.ts).
 */
export class Evaluation {
  readonly results: EvalResult[];
  /** Each slot's requests in order; null while there is one slot (all of them, as numbered). */
  private order: number[][] | null = null;
  private slotOf: Uint32Array | null = null;
  /** Per slot: the position in its order of the next request never handed out. */
  private next: number[] = [0];
  /** Per slot: requests handed back unrun (their batch stopped at another evaluation's timeout): handed out again first. */
  private again: number[][] = [[]];
  settled = 0;
  inFlight = 0;
  /** Cancelled: nothing more is handed out. */
  stopped = false;
  /**
   * With stopOnTimeout, the index of the first call that timed out or crashed
   * its worker: calls before it all run, calls after it count as skipped
   * (whichever worker ran them, and whenever), so what is evaluated does not
   * depend on how the calls were spread over workers.
   */
  cut = Number.POSITIVE_INFINITY;
  readonly promise: Promise<EvalResult[]>;
  resolve!: (results: EvalResult[]) => void;
  reject!: (error: unknown) => void;

  constructor(
    readonly requests: readonly EvalRequest[],
    readonly options: QueueOptions,
  ) {
    this.results = new Array<EvalResult>(requests.length);
    this.promise = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  /** Spread the requests over `slots` slots by their gold, before any is handed out. */
  split(slots: number): void {
    if (this.order !== null || slots <= 1) return;
    this.order = Array.from({ length: slots }, () => []);
    this.slotOf = new Uint32Array(this.requests.length);
    this.requests.forEach((request, index) => {
      const slot = slotOfGold(request.answer, slots);
      this.slotOf![index] = slot;
      this.order![slot]!.push(index);
    });
    this.next = new Array<number>(slots).fill(0);
    this.again = Array.from({ length: slots }, () => []);
  }

  /** Requests of a slot still to hand out. */
  waitingIn(slot: number): number {
    if (this.stopped) return 0;
    const again = this.again[slot]?.length ?? 0;
    const order = this.order?.[slot];
    if (this.order !== null && order === undefined) return again;
    // Its requests below the cut: all of them up to the cut while there is one slot.
    const end = order ? lowerBound(order, this.cut) : Math.min(this.requests.length, this.cut);
    return again + Math.max(0, end - (this.next[slot] ?? 0));
  }

  /** Requests still to hand out. */
  get waiting(): number {
    let total = 0;
    for (let slot = 0; slot < this.next.length; slot += 1) total += this.waitingIn(slot);
    return total;
  }

  /** Up to `room` of a slot's requests, those handed back first. */
  handOut(slot: number, room: number): number[] {
    const indices = this.again[slot]!.splice(0, room);
    const order = this.order?.[slot];
    const end = order ? lowerBound(order, this.cut) : Math.min(this.requests.length, this.cut);
    while (indices.length < room && this.next[slot]! < end) {
      const position = this.next[slot]!++;
      indices.push(order ? order[position]! : position);
    }
    return indices;
  }

  /** A request to hand out again. */
  handBack(index: number): void {
    this.again[this.slotOf ? this.slotOf[index]! : 0]!.push(index);
  }

  /** Requests handed back past the cut, or all of them once stopped, are not handed out. */
  dropAgain(): void {
    for (const again of this.again) {
      if (this.stopped) again.length = 0;
      else for (let kept = again.length - 1; kept >= 0; kept -= 1) if (again[kept]! > this.cut) again.splice(kept, 1);
    }
  }
}

/** How many of the ascending `sorted` are below `limit`. */
function lowerBound(sorted: readonly number[], limit: number): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sorted[middle]! < limit) low = middle + 1;
    else high = middle;
  }
  return low;
}
