import { GatekeptError } from '../errors.js';
import { cleanUpNow, killAllGroups } from '../runtime/cleanup.js';
import type { Sandbox } from '../runtime/sandbox.js';
import type { Probe } from './audit.js';
import type { Helper, SmokeEvent } from './helper.js';
import type { DataRow, PackageInfo } from './package.js';
import type { SmokeCheck } from './report.js';

/** One run against a library: what it is given, its deadline and its signal guard, and what it returns. */

export interface RunContext {
  pkg: PackageInfo;
  probes: Probe[];
  rows: DataRow[];
  python: string;
  workdir: string;
  /** The helpers' home as they see it. */
  home: string;
  sandbox: Sandbox;
  /** Directories the interpreter reads, kept visible in the sandbox. */
  pythonPaths: string[];
  deadline: Deadline;
  memoryMb: number;
  checks: SmokeCheck[];
  pids: number[];
  log: string[];
  interruption: Promise<never>;
}

/** What one episode scored (null when it scored nothing), and what went wrong besides. */
export interface Observed {
  reward: number | null;
  problems: string[];
}

export class Deadline {
  readonly at: number;
  constructor(readonly seconds: number) {
    this.at = Date.now() + seconds * 1000;
  }

  get remainingMs(): number {
    return Math.max(0, this.at - Date.now());
  }

  /** Resolves to the value, or to `timedOut` when the deadline passes first. */
  race<T, U>(work: Promise<T>, timedOut: U): Promise<T | U> {
    let timer: NodeJS.Timeout | undefined;
    const expiry = new Promise<U>((resolve) => {
      timer = setTimeout(() => resolve(timedOut), this.remainingMs);
    });
    return Promise.race([work, expiry]).finally(() => clearTimeout(timer));
  }
}

export const TIMED_OUT = Symbol('timed out');

/** The probes as a helper reads them on stdin. */
export function probesInput(probes: readonly Probe[]): string {
  return JSON.stringify({ probes: probes.map((probe) => ({ row: probe.row, completion: probe.completion })) });
}

/** The helper's first event of these names (null if it exited without one), TIMED_OUT past the deadline; rejects on a signal. */
export function nextEvent(context: RunContext, helper: Helper, names: readonly string[]): Promise<SmokeEvent | null | typeof TIMED_OUT> {
  return Promise.race([context.deadline.race(helper.next(names), TIMED_OUT), context.interruption]);
}

export interface Interruption {
  promise: Promise<never>;
  dispose(): void;
}

/**
 * SIGINT, SIGTERM and SIGHUP for the duration of a run: kill the package's processes,
 * then let the signal do what it would have done. Runs before any handler
 * registered earlier (the CLI's), which may end the process at once.
 */
export function guardSignals(): Interruption {
  let reject: (error: Error) => void = () => undefined;
  const promise = new Promise<never>((_, fail) => {
    reject = fail;
  });
  promise.catch(() => undefined);
  const handlers = new Map<NodeJS.Signals, () => void>();
  const dispose = (): void => {
    for (const [signal, handler] of handlers) process.off(signal, handler);
    handlers.clear();
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const handler = (): void => {
      killAllGroups();
      dispose();
      reject(new GatekeptError('HARNESS_FAILED', `interrupted by ${signal}`));
      // With no other listener Node would have ended the process; so do we,
      // and a death by signal runs no exit hook.
      if (process.listenerCount(signal) === 0) {
        cleanUpNow();
        process.kill(process.pid, signal);
      }
    };
    handlers.set(signal, handler);
    process.prependListener(signal, handler);
  }
  return { promise, dispose };
}
