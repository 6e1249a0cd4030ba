import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { GatekeptError } from './errors.js';

/**
 * Fail-closed output: everything is built in a hidden staging directory next
 * to the destination and renamed into place only when the gate passed. An
 * interrupted or rejected run leaves nothing at the destination.
 */

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
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
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

/** Refuse a destination that is a file, or a non-empty directory without `force`. */
export async function checkDestination(out: string, force: boolean): Promise<void> {
  const info = await existing(out);
  if (!info) return;
  if (!info.isDirectory()) {
    throw new GatekeptError('OUT_DIR_UNWRITABLE', `--out ${out} is a file`, { suggestion: 'choose a directory path for --out' });
  }
  if ((await readdir(out)).length > 0 && !force) {
    throw new GatekeptError('OUT_DIR_NOT_EMPTY', `--out ${out} is not empty`, {
      suggestion: 'choose an empty or new directory, or pass --force to replace its contents',
    });
  }
}

export async function createStaging(out: string): Promise<string> {
  const base = await nearestExistingAncestor(path.resolve(out));
  let dir: string;
  try {
    dir = await mkdtemp(path.join(base, `.gatekept-staging-${path.basename(out)}-`));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new GatekeptError('OUT_DIR_UNWRITABLE', `cannot write next to ${out} (${code ?? String(error)} in ${base})`, {
      suggestion: 'choose an --out location you can write to',
    });
  }
  live.add(dir);
  if (!hooked) {
    hooked = true;
    // A Ctrl-C ends the process through exit(); staging must not outlive it.
    process.on('exit', removeLiveStagingSync);
  }
  return dir;
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
