import type { EvalRequest, EvalResult } from '../calls.js';

/**
 * Slow inputs are a finding, not a crash. A reward that takes a minute on a
 * long completion stalls a training loop; the audit reports the input's size
 * and the time, leaves the call unjudged, and goes on auditing the rest, so
 * what the attacks found is reported alongside. The policy decides whether
 * it rejects (`timeouts.max_call_ms`). Times are wall clock, of a call run
 * again alone before it counts (as a timeout is), with the CPU time the
 * worker process spent beside them.
 */

/** Calls at least this slow are reported, whatever the policy: half a second a reply is already a cost in a training loop. */
export const SLOW_CALL_REPORT_MS = 500;
/** Examples kept: the slowest. */
const EXAMPLES = 5;

export interface SlowCall {
  completion: string;
  chars: number;
  ms: number;
  cpuMs: number | null;
  /** Cut at the call timeout (timeouts.call_ms), twice: it took at least `ms`. */
  cut: boolean;
}

export class SlowCalls {
  /** Calls that took SLOW_CALL_REPORT_MS or more. */
  count = 0;
  /** Of them, those over the policy's max_call_ms (a cut call always is). */
  overLimit = 0;
  private readonly slowest: SlowCall[] = [];
  private longestOver: SlowCall | null = null;

  /** `maxCallMs`: 0 means no call is over the limit for being slow. */
  constructor(private readonly maxCallMs: number) {}

  isOverLimit(result: EvalResult, cut: boolean): boolean {
    return this.maxCallMs > 0 && (cut || result.ms > this.maxCallMs);
  }

  note(request: EvalRequest, result: EvalResult, cut = false): void {
    if (!cut && result.ms < SLOW_CALL_REPORT_MS) return;
    const call: SlowCall = {
      completion: request.completion.slice(0, 80),
      chars: request.completion.length,
      ms: Math.round(result.ms),
      cpuMs: result.cpuMs === undefined ? null : Math.round(result.cpuMs),
      cut,
    };
    this.count += 1;
    if (this.isOverLimit(result, cut)) {
      this.overLimit += 1;
      // The longest such input is the example, whichever came back first.
      if (
        this.longestOver === null ||
        call.chars > this.longestOver.chars ||
        (call.chars === this.longestOver.chars && call.completion < this.longestOver.completion)
      ) {
        this.longestOver = call;
      }
    }
    this.slowest.push(call);
    this.slowest.sort((a, b) => b.ms - a.ms || a.chars - b.chars);
    if (this.slowest.length > EXAMPLES) this.slowest.pop();
  }

  /** What the record's timing says of them; null when no call was slow. */
  record(): { count: number; over_limit: number; examples: { completion: string; chars: number; ms: number; cpu_ms: number | null; cut: boolean }[] } | null {
    if (this.count === 0) return null;
    return {
      count: this.count,
      over_limit: this.overLimit,
      examples: this.slowest.map((call) => ({ completion: call.completion, chars: call.chars, ms: call.ms, cpu_ms: call.cpuMs, cut: call.cut })),
    };
  }

  /** What the decision needs: the calls over the limit, and the first of them. */
  decisionInput(): { count: number; limitMs: number; example: SlowCall } | null {
    if (this.overLimit === 0 || this.longestOver === null) return null;
    return { count: this.overLimit, limitMs: this.maxCallMs, example: this.longestOver };
  }
}
