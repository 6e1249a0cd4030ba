import { constants, rmSync } from 'node:fs';
import { access, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { GatekeptError } from '../errors.js';
import { makeRegisteredDir, removeStaleDirs } from '../runtime/stale-dirs.js';

/**
 * Fail-closed output: everything is built in a hidden staging directory next
 * to the destination and renamed into place only when the gate passed. An
 * interrupted or rejected run leaves nothing at the destination.
 *
 * Staging directories are named `.gatekept-staging-<name>-<pid>-XXXXXX`. A
 * run killed outright (SIGKILL runs no exit hook) leaves its own behind; the
 * next run that stages in the same directory removes those whose process is
 * gone.
 */

const STAGING_PREFIX = '.gatekept-staging-';
/** Group 1 is the creating pid; a `.previous` suffix marks a tree set aside by --force. */
const STAGING_PATTERN = /^\.gatekept-staging-.*-(\d+)-[A-Za-z0-9]{6}(\.previous)?$/;

const live = new Set<string>();
let hooked = false;

function removeLiveStagingSync(): void {
  for (const dir of live) rmSync(dir, { recursive: true, force: true });
  live.clear();
}

async function existing(target: string): Promise<Awaited<ReturnType<typeof stat>> | null> {
  try {
    return await stat(target);
  } catch (error) {
    // ENOTDIR: some ancestor is a file, so the target cannot exist either;
    // nearestExistingAncestor names that file.
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw unwritable(target, code ?? String(error), path.dirname(target));
  }
}

function unwritable(out: string, code: string, where: string): GatekeptError {
  return new GatekeptError('OUT_DIR_UNWRITABLE', `cannot write ${out} (${code} in ${where})`, {
    suggestion: 'choose an --out location you can write to',
  });
}

/** The closest ancestor of `target` that exists (the staging dir must share its filesystem). */
async function nearestExistingAncestor(target: string): Promise<string> {
  let dir = path.dirname(target);
  for (;;) {
    const info = await existing(dir);
    if (info) {
      if (!info.isDirectory()) {
        throw new GatekeptError('OUT_DIR_UNWRITABLE', `cannot create ${target}: ${dir} is a file, not a directory`, {
          suggestion: 'choose an --out path whose parents are directories',
        });
      }
      return dir;
    }
    const parent = path.dirname(dir);
    if (parent === dir) return dir;
    dir = parent;
  }
}

/**
 * Refuse a destination that is not a directory, lies under a file or in a
 * directory that cannot be written, or is a non-empty directory without `force`.
 */
export async function checkDestination(out: string, force: boolean): Promise<void> {
  const target = path.resolve(out);
  // First, so that a tree a killed --force run had set aside is back in place
  // before deciding whether --out is empty.
  await removeStaleDirs(await nearestExistingAncestor(target), STAGING_PATTERN, clearStale);
  const info = await existing(target);
  if (!info) {
    const base = await nearestExistingAncestor(target);
    try {
      await access(base, constants.W_OK);
    } catch (error) {
      throw unwritable(out, (error as NodeJS.ErrnoException).code ?? String(error), base);
    }
    return;
  }
  if (!info.isDirectory()) {
    throw new GatekeptError('OUT_DIR_UNWRITABLE', `--out ${out} exists and is not a directory`, {
      suggestion: 'choose a new or empty directory path for --out',
    });
  }
  if ((await readdir(target)).length > 0 && !force) {
    throw new GatekeptError('OUT_DIR_NOT_EMPTY', `--out ${out} is not empty`, {
      suggestion: 'choose an empty or new directory, or pass --force to replace its contents',
    });
  }
}

/**
 * A stale staging directory goes; a tree that a killed `--force` run had set
 * aside goes back to its place if nothing replaced it, as if that run had
 * never started.
 */
async function clearStale(entry: string): Promise<void> {
  const name = path.basename(entry);
  if (name.endsWith('.previous')) {
    const match = /^\.gatekept-staging-(.*)-\d+-[A-Za-z0-9]{6}\.previous$/.exec(name);
    const original = match?.[1] ? path.join(path.dirname(entry), match[1]) : null;
    if (original && !(await existing(original))) {
      await rename(entry, original);
      return;
    }
  }
  await rm(entry, { recursive: true, force: true });
}

export async function createStaging(out: string): Promise<string> {
  const base = await nearestExistingAncestor(path.resolve(out));
  await removeStaleDirs(base, STAGING_PATTERN, clearStale);
  if (!hooked) {
    hooked = true;
    // A Ctrl-C ends the process through exit(); staging must not outlive it.
    process.on('exit', removeLiveStagingSync);
  }
  try {
    return await makeRegisteredDir(base, `${STAGING_PREFIX}${path.basename(out)}-${process.pid}-`, live);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new GatekeptError('OUT_DIR_UNWRITABLE', `cannot write next to ${out} (${code ?? String(error)} in ${base})`, {
      suggestion: 'choose an --out location you can write to',
    });
  }
}

export async function discardStaging(dir: string): Promise<void> {
  live.delete(dir);
  await rm(dir, { recursive: true, force: true });
}

/** Move the staged tree to `out`. With `force`, an existing tree is replaced only once the new one is complete. */
export async function commitStaging(dir: string, out: string, force: boolean): Promise<void> {
  const target = path.resolve(out);
  await mkdir(path.dirname(target), { recursive: true });
  const info = await existing(target);
  let trash: string | null = null;
  if (info) {
    if ((await readdir(target)).length > 0) {
      if (!force) throw new GatekeptError('OUT_DIR_NOT_EMPTY', `--out ${out} became non-empty while packing`);
      trash = `${dir}.previous`;
      await rename(target, trash);
    } else {
      await rm(target, { recursive: true, force: true });
    }
  }
  await rename(dir, target);
  live.delete(dir);
  if (trash) await rm(trash, { recursive: true, force: true });
}
