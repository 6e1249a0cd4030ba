import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isRecord } from '../hand-check.js';
import { PACKAGE_ROOT } from '../paths.js';

/**
 * What a run learns by starting an interpreter before its workers (its
 * version, executable and import paths), kept between runs, and the harness
 * compiled by that interpreter once, so that no worker compiles it again.
 * Both cost a Python start and some tens of milliseconds on every run, which
 * on a small audit is a visible share of the whole command.
 *
 * An entry is used only while everything it was read from is unchanged: the
 * interpreter (as given and as it resolves), its prefixes and every directory
 * on its import path (installing a package changes its directory). Anything
 * else, or an entry that cannot be read, means the interpreter is asked
 * again. The cache lives in the user's own cache directory, which the
 * sandbox hides from verifiers but a verifier run without it can write.
 *
 * So the compiled files are trusted for their content, not for their
 * stamps: a file rewritten in place keeps its size and, set back, its
 * mtime. The entry records the hash of each compiled file as the probe
 * wrote it (its key holds the hash of the sources), and every run reads
 * the files once, checks them against those hashes and keeps what it read:
 * each worker gets a copy of those bytes in its run's own directory, never
 * the cache's file, which could change after the check (see loadCompiled).
 */

/**
 * Sources the workers run, compiled once per interpreter: the harness and
 * every module it imports from beside it (see python/harness.py).
 */
export const COMPILED_SOURCES = [
  'harness.py',
  'gatekept_reward.py',
  'gatekept_state.py',
  'gatekept_process.py',
  'gatekept_output.py',
  'gatekept_isolation.py',
  'gatekept_containment.py',
  'gatekept_calls.py',
  'gatekept_worker.py',
  'gatekept_supervisor.py',
] as const;

export interface CachedRuntime {
  /** The interpreter as given. */
  python: string;
  /**
   * The interpreter's own sys.executable: what a wrapper (a pyenv shim, a
   * script) ends up running. Processes start this, so a sandbox needs no
   * view of the wrapper's machinery.
   */
  executable: string;
  version: [number, number, number];
  /** Everything the interpreter reads at start-up and import: prefixes, sys.path, the real binary. */
  paths: string[];
  /** A directory holding COMPILED_SOURCES compiled by this interpreter, as `NAME.pyc`; null when compiling failed. */
  bytecode: string | null;
  /** The SHA-256 of each `NAME.pyc` in `bytecode`, as the probe wrote it; null with it. */
  compiled: Record<string, string> | null;
}

interface Entry {
  runtime: CachedRuntime;
  stamps: [string, string][];
}

/** Bumped when what a probe returns changes shape, so older entries are ignored. */
const CACHE_VERSION = 2;

function cacheRoot(): string {
  const base = process.env.XDG_CACHE_HOME && path.isAbsolute(process.env.XDG_CACHE_HOME) ? process.env.XDG_CACHE_HOME : path.join(os.homedir(), '.cache');
  return path.join(base, 'gatekept');
}

let sourcesDigest: string | null = null;

/** Changes whenever a compiled source changes, so a new gatekept never runs an old harness. */
function digestOfSources(): string {
  if (sourcesDigest === null) {
    const hash = createHash('sha256');
    for (const name of COMPILED_SOURCES)
      hash
        .update(name)
        .update('\0')
        .update(readFileSync(path.join(PACKAGE_ROOT, 'python', name)))
        .update('\0');
    sourcesDigest = hash.digest('hex').slice(0, 16);
  }
  return sourcesDigest;
}

function keyOf(python: string, minimumVersion: readonly [number, number]): string {
  return createHash('sha256')
    .update(`${CACHE_VERSION}\0${python}\0${minimumVersion.join('.')}\0${digestOfSources()}`)
    .digest('hex')
    .slice(0, 32);
}

/**
 * Where the interpreter `python` puts the compiled harness: one directory per
 * entry, so that the probe of one entry never rewrites the files whose
 * hashes another recorded.
 */
export function bytecodeDir(python: string, minimumVersion: readonly [number, number]): string {
  return path.join(cacheRoot(), 'bytecode', keyOf(python, minimumVersion));
}

/**
 * Which file, its size and when its content last changed. Not its ctime: a
 * new hard link changes that without touching the file.
 */
function stamp(entry: string): string {
  try {
    const info = statSync(entry);
    return `${info.dev}:${info.ino}:${info.size}:${info.mtimeMs}`;
  } catch {
    return 'missing';
  }
}

function watched(runtime: CachedRuntime): string[] {
  return [...new Set([runtime.python, runtime.executable, ...runtime.paths])];
}

function entryFile(python: string, minimumVersion: readonly [number, number]): string {
  return path.join(cacheRoot(), 'runtimes', `${keyOf(python, minimumVersion)}.json`);
}

export function readCachedRuntime(python: string, minimumVersion: readonly [number, number]): CachedRuntime | null {
  let entry: Entry;
  try {
    entry = JSON.parse(readFileSync(entryFile(python, minimumVersion), 'utf8')) as Entry;
  } catch {
    return null;
  }
  const runtime = entry?.runtime;
  if (!runtime || runtime.python !== python || !Array.isArray(entry.stamps) || !Array.isArray(runtime.paths)) return null;
  if (runtime.bytecode !== null && (runtime.bytecode !== bytecodeDir(python, minimumVersion) || !isRecord(runtime.compiled))) return null;
  const expected = watched(runtime);
  if (entry.stamps.length !== expected.length) return null;
  for (const [index, [file, value]] of entry.stamps.entries()) {
    if (file !== expected[index] || stamp(file) !== value) return null;
  }
  return runtime;
}

/** Best effort: a cache that cannot be written only costs the next run a probe. */
export function writeCachedRuntime(runtime: CachedRuntime, minimumVersion: readonly [number, number]): void {
  const file = entryFile(runtime.python, minimumVersion);
  const entry: Entry = { runtime, stamps: watched(runtime).map((entry) => [entry, stamp(entry)]) };
  try {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, JSON.stringify(entry), { mode: 0o600 });
    renameSync(partial, file);
  } catch {
    // read-only home, full disk: the probe runs again next time
  }
}

function sha256(content: Uint8Array): string {
  return createHash('sha256').update(content).digest('hex');
}

/** The compiled scripts, by file name (`NAME.pyc`), as read and checked; or the first that is not what the probe wrote. */
export type LoadedCompiled = { scripts: ReadonlyMap<string, Buffer> } | { changed: string };

/**
 * Read the compiled harness once and check every file against the hash
 * recorded when it was compiled. What a run then gives its workers is these
 * bytes, never a path into the cache, so a file changed after the check
 * changes nothing for this run. Ten small files: well under a millisecond.
 */
export function loadCompiled(runtime: CachedRuntime): LoadedCompiled {
  const scripts = new Map<string, Buffer>();
  if (!runtime.bytecode || !runtime.compiled) return { changed: 'the harness was not compiled' };
  for (const source of COMPILED_SOURCES) {
    const name = `${source}c`;
    let content: Buffer;
    try {
      content = readFileSync(path.join(runtime.bytecode, name));
    } catch {
      return { changed: `${name} is missing` };
    }
    if (runtime.compiled[name] !== sha256(content)) return { changed: `${name} is not the file gatekept compiled` };
    scripts.set(name, content);
  }
  return { scripts };
}

/**
 * Write the checked scripts into `dir` (a run's own directory) and return
 * the harness among them. Written, not linked: a hard link would share the
 * cache file's inode, which anything that can write the cache can rewrite.
 */
export function writeCompiled(scripts: ReadonlyMap<string, Buffer>, dir: string): string {
  mkdirSync(dir, { mode: 0o700 });
  for (const [name, content] of scripts) writeFileSync(path.join(dir, name), content, { mode: 0o600, flag: 'wx' });
  return path.join(dir, 'harness.pyc');
}
