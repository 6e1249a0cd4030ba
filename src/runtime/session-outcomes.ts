/**
 * What a PythonSession's segment of a batch can end in, and the results and
 * failures it makes of them, with the time limits they are judged by.
 */
import { noRewardResult, type EvalResult } from '../calls.js';
import { GatekeptError } from '../errors.js';
import { describeExit, type ExitInfo } from './python-process.js';
import { IMPORT_WALL_FACTOR } from './session-options.js';

/** Slack on top of the call timeout before a silent worker is presumed stuck. */
export const CALL_GRACE_MS = 1000;
/** The worker times its own import out first, so it can say where it hung. */
const IMPORT_GRACE_MS = 1000;

/**
 * After the import the worker warms the verifier up with a few calls (see
 * _warm_up in python/gatekept_calls.py), within one call timeout in all; a warm-up
 * that kills or hangs the worker is given up after that and a second of
 * slack, and the worker is started again, importing the verifier once more,
 * without one.
 */
export function readyDeadlineMs(importTimeoutMs: number, callTimeoutMs: number): number {
  const importWallMs = importTimeoutMs * IMPORT_WALL_FACTOR;
  return 2 * importWallMs + callTimeoutMs + 1000 + IMPORT_GRACE_MS;
}

export const MAX_RESTARTS = 50;
/** Starts of a worker again because its host was lost (not the verifier's doing), per session. */
export const MAX_HOST_LOSSES = 8;

export type SegmentOutcome =
  | { kind: 'done' }
  /** The worker itself reported a timeout at `index` and was asked to stop there. */
  | { kind: 'stopped'; index: number }
  | { kind: 'timeout'; index: number; ms: number }
  | { kind: 'crashed'; index: number; ms: number; exit: ExitInfo }
  /** The worker's host (a Ray actor) was lost: the call at `index` never finished, and runs again on another. */
  | { kind: 'lost'; index: number };

export function timeoutResult(callTimeoutMs: number, ms: number): EvalResult {
  // Mirrors the worker's own timeout reply so the path taken does not show.
  return noRewardResult('timeout', { type: 'Timeout', message: `the verifier did not return within ${callTimeoutMs} ms` }, ms);
}

/** A process of the audit found stopped: its silence is not the verifier's time, so nothing can be decided. */
export function stoppedFailure(when: string): GatekeptError {
  return new GatekeptError('HARNESS_FAILED', `a process of the audit was stopped ${when} (SIGSTOP or the like), so it could not answer: nothing was decided`, {
    suggestion: 'the verifier or something it started stops processes; audit a verifier that does not',
  });
}

export function crashedResult(exit: ExitInfo, ms: number): EvalResult {
  return noRewardResult('crashed', { type: 'ProcessExited', message: `the verifier process ${describeExit(exit)}` }, ms);
}

export function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** A worker's host was lost while it started (see launch). */
export class HostLost extends Error {
  constructor(readonly failure: GatekeptError) {
    super(failure.message);
  }
}
