import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
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
 * on its import path (installing a package changes its directory), and the
 * compiled files. Anything else, or an entry that cannot be read, means the
 * interpreter is asked again. The cache lives in the user's own cache
 * directory, which the sandbox hides from verifiers.
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
  python: string;
  executable: string;
  version: [number, number, number];
  paths: string[];
  /** A directory holding COMPILED_SOURCES compiled by this interpreter, as `NAME.pyc`; null when compiling failed. */
  bytecode: string | null;
}

interface Entry {
  runtime: CachedRuntime;
  stamps: [string, string][];
}

/** Bumped when what a probe returns changes shape, so older entries are ignored. */
const CACHE_VERSION = 1;

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

/** Where the interpreter `python` puts the compiled harness. */
export function bytecodeDir(python: string): string {
  const key = createHash('sha256').update(`${python}\0${digestOfSources()}`).digest('hex').slice(0, 32);
  return path.join(cacheRoot(), 'bytecode', key);
}

/**
 * Which file, its size and when its content last changed. Not its ctime: a
 * new hard link changes that without touching the file, and each sandboxed
 * launch links the compiled scripts into its own directory (see
 * sandbox.ts), which made every run after a sandboxed one probe again.
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
  const files = runtime.bytecode ? COMPILED_SOURCES.map((name) => path.join(runtime.bytecode!, `${name}c`)) : [];
  return [...new Set([runtime.python, runtime.executable, ...runtime.paths, ...files])];
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
