import { GatekeptError } from '../errors.js';
import type { GatePolicy } from '../audit/policy.js';
import { groupScope, killGroup } from './cleanup.js';
import { IMPORT_WALL_FACTOR } from './session-options.js';

/**
 * The last line: a wall-clock bound on a whole command, kept by Node's own
 * clock outside every process it starts. Whatever the processes inside do
 * (stop, block signals, never answer), the command ends when it passes:
 * every process group it started is killed and it fails as could not audit
 * (exit 3), never with a verdict.
 */

/** Time for the work around the audit itself: planning, the reports, taking the workers down. */
const BOUND_SLACK_MS = 30_000;

/**
 * The bound a policy gives a command: the audit's own deadline
 * (timeouts.total_s, which the calls run under), plus what starting the
 * verifier may take before it (an import and a warm-up, started again once)
 * and some slack.
 */
export function hardBoundMs(policy: GatePolicy): number {
  const importWallMs = policy.timeouts.importMs * IMPORT_WALL_FACTOR;
  return policy.timeouts.totalS * 1000 + 2 * importWallMs + policy.timeouts.callMs + BOUND_SLACK_MS;
}

/** Run `work` under the bound; the processes it starts are killed when the bound passes. */
export async function withinHardBound<T>(boundMs: number, command: string, work: () => Promise<T>): Promise<T> {
  const groups = new Set<number>();
  let timer: NodeJS.Timeout | undefined;
  const running = groupScope.run(groups, work);
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      for (const pid of groups) killGroup(pid);
      reject(
        new GatekeptError(
          'HARNESS_FAILED',
          `${command} did not end within its hard bound of ${Math.round(boundMs / 1000)} s, so every process it started was killed and nothing was decided`,
          {
            suggestion: 'raise timeouts.total_s (the bound is it, plus the import limit twice, one call and 30 s), or audit fewer rows',
          },
        ),
      );
    }, boundMs);
  });
  // Once the bound has passed, what the work still settles with is of no use.
  running.catch(() => undefined);
  try {
    return await Promise.race([running, expired]);
  } finally {
    clearTimeout(timer);
  }
}
