import { readdirSync, readFileSync } from 'node:fs';

/**
 * What Node can see of a process tree from outside it, in /proc, whatever
 * the processes inside do to their signals: a verifier can block or swallow
 * the timer signals the harness times its calls with, but not hide from the
 * kernel's own table.
 */

/** A process's state letter (`R`, `S`, `T` for stopped, `t` for traced-stopped...), or null once it is gone. */
function stateOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The state follows the command name, which may itself hold spaces and parentheses.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) || null;
  } catch {
    return null;
  }
}

/** `root` and its descendants, through every thread's list of children. */
function treeOf(root: number): number[] {
  const seen = new Set<number>([root]);
  const queue = [root];
  while (queue.length > 0 && seen.size < 10_000) {
    const pid = queue.shift()!;
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      let children: string;
      try {
        children = readFileSync(`/proc/${pid}/task/${task}/children`, 'latin1');
      } catch {
        continue;
      }
      for (const child of children.split(' ')) {
        const next = Number(child);
        if (Number.isSafeInteger(next) && next > 0 && !seen.has(next)) {
          seen.add(next);
          queue.push(next);
        }
      }
    }
  }
  return [...seen];
}

/**
 * Whether any process of the tree under `root` is stopped (SIGSTOP, SIGTSTP,
 * a tracer). Only read when a call or an import has overrun its time: a
 * stopped supervisor cannot report the timeout it should have, and its
 * silence must fail the audit rather than count as a slow verifier.
 */
export function stoppedInTree(root: number): boolean {
  return treeOf(root).some((pid) => {
    const state = stateOf(pid);
    return state === 'T' || state === 't';
  });
}
