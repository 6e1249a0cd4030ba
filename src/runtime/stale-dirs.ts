import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { lstat, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * Temporary directories are named after the process that made them, so that a
 * later run can tell the leftovers of a killed run (SIGKILL skips every exit
 * hook) from those of a run that is still going.
 */

/** True only when no process with this pid exists; EPERM means it does, under another user. */
function processGone(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * Pids are reused (the default pid_max is 32768, and a test suite or a busy
 * machine goes round it), so a live process with the creator's pid is not
 * proof that the creator lives: one that started after the entry last
 * changed cannot have made it. Linux only; elsewhere, and whenever /proc
 * cannot tell, the process counts as the creator and its entry stays.
 */
export function processStartedAfter(pid: number, timeMs: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22, counted after the command name, which may itself hold spaces and parentheses.
    const startTicks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    const uptimeSeconds = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    if (!Number.isFinite(startTicks) || !Number.isFinite(uptimeSeconds)) return false;
    // USER_HZ is 100 on every Linux ABI Node supports.
    const startedMs = Date.now() - (uptimeSeconds - startTicks / 100) * 1000;
    return startedMs > timeMs + REUSE_MARGIN_MS;
  } catch {
    return false;
  }
}

/** Clock and tick rounding are tens of milliseconds; a margin of seconds keeps a live creator's entry safe. */
const REUSE_MARGIN_MS = 2000;

async function creatorGone(pid: number, entry: string): Promise<boolean> {
  if (processGone(pid)) return true;
  try {
    return processStartedAfter(pid, (await lstat(entry)).ctimeMs);
  } catch {
    return false;
  }
}

/**
 * Remove the entries of `dir` whose name matches `pattern` (its first group
 * is the creator's pid) and whose creator is gone. Best effort: a directory
 * that cannot be listed or removed is left alone.
 */
export async function removeStaleDirs(
  dir: string,
  pattern: RegExp,
  handle: (entry: string) => Promise<void> = (entry) => rm(entry, { recursive: true, force: true }),
): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const match = pattern.exec(name);
    if (!match || match[1] === undefined || Number(match[1]) === process.pid) continue;
    const entry = path.join(dir, name);
    if (!(await creatorGone(Number(match[1]), entry))) continue;
    try {
      await handle(entry);
      removed.push(entry);
    } catch {
      // another run may be cleaning up the same leftovers
    }
  }
  return removed;
}

const SUFFIX_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * Create `parent/<prefix>XXXXXX` (the shape mkdtemp makes) and record it in
 * `registry` before it exists: an exit hook that removes what the registry
 * holds then never misses a directory created just before the process ended.
 */
export function makeRegisteredDir(parent: string, prefix: string, registry: Set<string>): string {
  for (let attempt = 0; ; attempt++) {
    const dir = path.join(parent, `${prefix}${randomSuffix()}`);
    registry.add(dir);
    try {
      mkdirSync(dir, { mode: 0o700 });
      return dir;
    } catch (error) {
      registry.delete(dir);
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 10) throw error;
    }
  }
}

function randomSuffix(): string {
  return [...randomBytes(6)].map((byte) => SUFFIX_ALPHABET[byte % SUFFIX_ALPHABET.length]).join('');
}

/**
 * Working directories of verifier processes. A sandbox's mount table shows
 * where its home comes from, so their names say nothing of gatekept: `run-`,
 * the creator's pid and a random suffix. Which of them are ours is told by a
 * marker file beside the home, outside what the sandbox sees.
 */
const WORK_DIR_PATTERN = /^run-(\d+)-[A-Za-z0-9]{6}$/;
const WORK_DIR_MARKER = '.gatekept-work-dir';
/**
 * What a work directory holds at its top (the sandbox's scratch files among
 * them, see sandbox.ts): a run killed before it wrote the marker, or while
 * its removal had taken the marker and not yet the rest, leaves no more.
 */
const WORK_DIR_ENTRIES = /^(home|tmp|code|app|app-source|init-cmdline|passwd|group|empty|seccomp(-nounix)?\.bpf.*)$/;
let sweepStarted = false;

async function isOurWorkDir(entry: string): Promise<boolean> {
  const names = await readdir(entry);
  return names.includes(WORK_DIR_MARKER) || names.every((name) => WORK_DIR_ENTRIES.test(name));
}

let sweep: Promise<void> = Promise.resolve();

/** Settles once the sweep of dead runs' work directories that the first makeWorkDir started is over. */
export function workDirsSwept(): Promise<void> {
  return sweep;
}

export async function makeWorkDir(registry: Set<string>): Promise<string> {
  const parent = tmpdir();
  if (!sweepStarted) {
    sweepStarted = true;
    // In the background, from the next turn of the event loop: leftovers of
    // dead runs never share a name with a live run's directory, and the
    // worker's start, which follows, should not wait on them.
    sweep = new Promise<void>((resolve) => setImmediate(resolve)).then(() =>
      removeStaleDirs(parent, WORK_DIR_PATTERN, async (entry) => {
        // Not ours unless marked (or holding only what ours hold): another
        // program's `run-<pid>-` is left alone.
        if (!(await isOurWorkDir(entry))) throw new Error('not a work directory of ours');
        await rm(entry, { recursive: true, force: true });
      }).then(
        () => undefined,
        () => undefined,
      ),
    );
  }
  // Made synchronously (four quick calls), so a worker's launch reaches its
  // spawn without yielding to the planning that runs meanwhile.
  const dir = makeRegisteredDir(parent, `run-${process.pid}-`, registry);
  writeFileSync(path.join(dir, WORK_DIR_MARKER), '', { mode: 0o600 });
  mkdirSync(path.join(dir, 'home'), { mode: 0o700 });
  mkdirSync(path.join(dir, 'tmp'), { mode: 0o700 });
  return dir;
}
