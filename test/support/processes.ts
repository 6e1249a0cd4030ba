/**
 * Finding processes a run left behind. Each run gets its own TMPDIR, so its
 * Python workers (whose working directory lives there) and anything they
 * started (which inherits that directory, or names it in its argv) carry a
 * marker no other process on the machine has.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Leftover {
  pid: number;
  /** As in /proc/<pid>/stat: R running, S sleeping... */
  state: string;
  /** CPU time used so far, user and system, in clock ticks (usually 100 a second). */
  cpuTicks: number;
  cmdline: string;
  cwd: string;
}

function marked(cmdline: string, cwd: string, marker: string): boolean {
  return cmdline.includes(marker) || cwd === marker || cwd.startsWith(`${marker}/`);
}

/**
 * Live processes (zombies excluded) whose command line or working directory
 * contains `marker`, and their descendants: inside a bubblewrap sandbox a
 * worker's working directory is a path of the sandbox's own, but the
 * sandbox's bwrap processes name the run's directory in their arguments, and
 * whatever runs inside, however it detached, stays their descendant.
 */
export async function processesMarkedBy(marker: string): Promise<Leftover[]> {
  const all: (Leftover & { ppid: number; marked: boolean })[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      // Fields after the command name, which may itself contain spaces and parentheses.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const state = fields[0] ?? '';
      const cpuTicks = Number(fields[11]) + Number(fields[12]);
      if (state === 'Z' || state === 'X') continue;
      const cmdline = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).replaceAll('\0', ' ').trim();
      const cwd = await readlink(`/proc/${entry}/cwd`).catch(() => '');
      all.push({ pid: Number(entry), ppid: Number(fields[1]), state, cpuTicks, cmdline, cwd, marked: marked(cmdline, cwd, marker) });
    } catch {
      // the process ended while it was being read
    }
  }
  const markedPids = new Set(all.filter((entry) => entry.marked).map((entry) => entry.pid));
  for (let grew = true; grew; ) {
    grew = false;
    for (const entry of all) {
      if (!markedPids.has(entry.pid) && markedPids.has(entry.ppid)) {
        markedPids.add(entry.pid);
        grew = true;
      }
    }
  }
  return all.filter((entry) => markedPids.has(entry.pid)).map(({ pid, state, cpuTicks, cmdline, cwd }) => ({ pid, state, cpuTicks, cmdline, cwd }));
}

/**
 * The marked processes still alive once the dust settles: a SIGKILL is
 * asynchronous, so give the kernel a moment before calling anything a leak.
 */
export async function leftoverProcesses(marker: string, patienceMs = 3000): Promise<Leftover[]> {
  const deadline = Date.now() + patienceMs;
  for (;;) {
    const found = await processesMarkedBy(marker);
    if (found.length === 0 || Date.now() > deadline) return found;
    await sleep(100);
  }
}

/** After a failed assertion, end what the run left so later tests start clean. */
export function killAll(leftovers: readonly Leftover[]): void {
  for (const { pid } of leftovers) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
