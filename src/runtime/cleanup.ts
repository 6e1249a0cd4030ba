import { AsyncLocalStorage } from 'node:async_hooks';
import { removeWorkDirSync } from './stale-dirs.js';

/**
 * The one registry of what must not outlive gatekept: the process groups of
 * the Python processes it started and the temporary directories it made.
 * A single synchronous exit hook empties it, because a process.exit()
 * elsewhere (the CLI's Ctrl-C handler) skips every finally block.
 */

const liveGroups = new Set<number>();
const liveDirs = new Set<string>();
let hooked = false;

/** SIGKILL (or `signal`) a whole process group; a group that is gone is not an error. */
export function killGroup(pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/** Synchronous, for when the process is going away and no await will return. */
export function cleanUpNow(): void {
  for (const pid of liveGroups) killGroup(pid);
  for (const dir of liveDirs) {
    try {
      removeWorkDirSync(dir);
    } catch {
      // best effort while the process is going away
    }
  }
}

function installExitHook(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', cleanUpNow);
}

/**
 * The groups started within one bounded command (see hard-bound.ts), so that
 * its bound kills what that command started and nothing of another running
 * beside it in the same process.
 */
export const groupScope = new AsyncLocalStorage<Set<number>>();

export function registerGroup(pid: number): void {
  installExitHook();
  liveGroups.add(pid);
  groupScope.getStore()?.add(pid);
}

export function releaseGroup(pid: number): void {
  liveGroups.delete(pid);
}

/** The set temporary directories are recorded in (before they exist, see makeRegisteredDir). */
export function liveDirRegistry(): Set<string> {
  installExitHook();
  return liveDirs;
}

/** Kill every registered group now (an interrupted run), leaving directories to the exit hook. */
export function killAllGroups(): void {
  for (const pid of liveGroups) killGroup(pid);
}
