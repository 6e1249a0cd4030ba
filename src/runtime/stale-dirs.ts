import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * Temporary directories are named after the process that made them, so that a
 * later run can tell the leftovers of a killed run (SIGKILL skips every exit
 * hook) from those of a run that is still going.
 */

/** True only when no process with this pid exists; EPERM means it does, under another user. */
export function processGone(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
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
    if (!match || match[1] === undefined || Number(match[1]) === process.pid || !processGone(Number(match[1]))) continue;
    const entry = path.join(dir, name);
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
export async function makeRegisteredDir(parent: string, prefix: string, registry: Set<string>): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const suffix = [...randomBytes(6)].map((byte) => SUFFIX_ALPHABET[byte % SUFFIX_ALPHABET.length]).join('');
    const dir = path.join(parent, `${prefix}${suffix}`);
    registry.add(dir);
    try {
      await mkdir(dir, { mode: 0o700 });
      return dir;
    } catch (error) {
      registry.delete(dir);
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 10) throw error;
    }
  }
}

/**
 * Working directories of verifier processes. A sandbox's mount table shows
 * where its home comes from, so their names say nothing of gatekept: `run-`,
 * the creator's pid and a random suffix. Which of them are ours is told by a
 * marker file beside the home, outside what the sandbox sees.
 */
const WORK_DIR_PATTERN = /^run-(\d+)-[A-Za-z0-9]{6}$/;
const WORK_DIR_MARKER = '.gatekept-work-dir';
/** What a work directory holds at its top: a run killed before it wrote the marker leaves no more than these. */
const WORK_DIR_ENTRIES = /^(home|tmp|code|app|init-cmdline|seccomp\.bpf.*)$/;
let workDirsSwept = false;

async function isOurWorkDir(entry: string): Promise<boolean> {
  const names = await readdir(entry);
  return names.includes(WORK_DIR_MARKER) || names.every((name) => WORK_DIR_ENTRIES.test(name));
}

export async function makeWorkDir(registry: Set<string>): Promise<string> {
  const parent = tmpdir();
  if (!workDirsSwept) {
    workDirsSwept = true;
    await removeStaleDirs(parent, WORK_DIR_PATTERN, async (entry) => {
      // Not ours unless marked (or holding only what ours hold): another
      // program's `run-<pid>-` is left alone.
      if (!(await isOurWorkDir(entry))) throw new Error('not a work directory of ours');
      await rm(entry, { recursive: true, force: true });
    });
  }
  const dir = await makeRegisteredDir(parent, `run-${process.pid}-`, registry);
  await writeFile(path.join(dir, WORK_DIR_MARKER), '', { mode: 0o600 });
  await mkdir(path.join(dir, 'home'), { mode: 0o700 });
  await mkdir(path.join(dir, 'tmp'), { mode: 0o700 });
  return dir;
}
