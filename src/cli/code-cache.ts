import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { Script } from 'node:vm';

/**
 * Loads the bundled command line with V8's compiled code kept between runs.
 *
 * Compiling the bundle is most of what the command costs beyond a bare
 * `node` start, and a one-answer gate is short enough for that to be a
 * visible share of it. Node 20 has no compile cache of its own, so the
 * bundle (one CommonJS file) is compiled here through `vm.Script`, handing
 * V8 the code it produced on an earlier run. V8 checks that code against
 * its own version and flags and rejects it when they differ; the source is
 * pinned by the cache key, since V8 checks only the source's length.
 *
 * The code is written after the command has run, so it holds the functions
 * that command compiled; each command keeps its own, so a `--help` does not
 * leave a cache without the gate in it. A cache that cannot be read or
 * written only costs a compilation: it never changes what the command does.
 * This file uses Node's own modules only, so loading it loads nothing else.
 */

export interface LoadedCli {
  run: (argv: readonly string[]) => Promise<number>;
  /** Writes the compiled code when there was none or V8 rejected it; never throws. */
  keep: () => void;
}

/** Commands with code of their own; anything else (`--help`, a typo) shares one entry. */
const COMMANDS = new Set(['gate', 'audit', 'pack', 'smoke']);

/** An entry of another build is removed once it is this old, when a new entry is written. */
const STALE_MS = 7 * 24 * 3600 * 1000;

export function codeCacheDir(): string {
  const xdg = process.env.XDG_CACHE_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.cache');
  return path.join(base, 'gatekept', 'v8');
}

/** Names the bundle exactly as it is on disk (a rebuild changes its ctime) and the Node that compiles it. */
function keyOf(file: string): string {
  const info = statSync(file);
  const stamp = `${process.version}\0${process.arch}\0${file}\0${info.dev}:${info.ino}:${info.size}:${info.mtimeMs}:${info.ctimeMs}`;
  return createHash('sha256').update(stamp).digest('hex').slice(0, 32);
}

function readOrNull(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

export function loadCli(file: string, argv: readonly string[]): LoadedCli {
  const source = readFileSync(file, 'utf8');
  const key = keyOf(file);
  const dir = codeCacheDir();
  const entry = path.join(dir, `${key}-${COMMANDS.has(argv[0] ?? '') ? argv[0] : 'other'}.bin`);
  const cachedData = readOrNull(entry);
  // CommonJS's own wrapper, so the bundle sees require, module and __filename as under require().
  const wrapped = `(function (exports, require, module, __filename, __dirname) { ${source}\n});`;
  const script = new Script(wrapped, { filename: file, ...(cachedData ? { cachedData } : {}) });
  const module = { exports: {} as { run?: LoadedCli['run'] } };
  (script.runInThisContext() as (...args: unknown[]) => void).call(module.exports, module.exports, createRequire(file), module, file, path.dirname(file));
  const run = module.exports.run;
  if (typeof run !== 'function') throw new Error(`${file} does not export run()`);
  return {
    run,
    keep: () => {
      if (cachedData && !script.cachedDataRejected) return;
      try {
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        const partial = `${entry}.${process.pid}.tmp`;
        writeFileSync(partial, script.createCachedData(), { mode: 0o600 });
        renameSync(partial, entry);
        pruneOtherBuilds(dir, key);
      } catch {
        // read-only home, full disk: the next run compiles again
      }
    },
  };
}

function pruneOtherBuilds(dir: string, key: string): void {
  const now = Date.now();
  for (const name of readdirSync(dir)) {
    if (name.startsWith(key)) continue;
    const file = path.join(dir, name);
    try {
      if (now - statSync(file).mtimeMs > STALE_MS) unlinkSync(file);
    } catch {
      // removed by another run meanwhile
    }
  }
}
