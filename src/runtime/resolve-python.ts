import { execFile } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { GatekeptError } from '../errors.js';
import { isRecord } from '../hand-check.js';
import { PACKAGE_ROOT } from '../paths.js';
import { MIN_PYTHON, olderThan, type PythonVersion, versionText } from './python-minimum.js';
import { bytecodeDir, type CachedRuntime, COMPILED_SOURCES, loadCompiled, readCachedRuntime, writeCachedRuntime } from './runtime-cache.js';

/**
 * The interpreter is resolved once, at the library boundary, to an absolute
 * path: every Python process starts in a temporary working directory (or in
 * a sandbox), where a relative `.venv/bin/python` would name nothing.
 */

/** The interpreter asked for: --python, else $GATEKEPT_PYTHON, else python3. */
function chosenPython(explicit: string | undefined): string {
  return explicit ?? process.env.GATEKEPT_PYTHON ?? 'python3';
}

function findOnPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.resolve(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** `--python venv` names the virtual environment in the current directory, not a program on PATH. */
function isVenvDir(candidate: string): boolean {
  try {
    return statSync(candidate).isDirectory() && statSync(path.join(candidate, 'bin', 'python')).isFile();
  } catch {
    return false;
  }
}

/** Where `scripts/setup-python-env.sh TARGET` builds its venv: the same default and override. */
export function setupVenvDir(target: string): string {
  const root = process.env.GATEKEPT_VENV_ROOT || path.join(homedir(), '.cache', 'gatekept', 'venvs');
  return path.join(root, target);
}

/**
 * An absolute path for the interpreter: a bare name is looked up on PATH, a
 * relative path is taken from `cwd`, and a virtual environment's directory
 * stands for its own `bin/python`. The path is not followed through
 * symlinks: a venv's interpreter is a symlink whose location makes it the venv.
 * A name that cannot be found is returned as given, so that starting it names it.
 */
export function resolvePython(explicit: string | undefined, cwd: string = process.cwd()): string {
  const chosen = chosenPython(explicit);
  const isPath = chosen.includes('/') || chosen.includes(path.sep) || isVenvDir(path.resolve(cwd, chosen));
  const located = isPath ? path.resolve(cwd, chosen) : findOnPath(chosen);
  if (located === null) return chosen;
  try {
    if (statSync(located).isDirectory()) {
      const inside = path.join(located, 'bin', 'python');
      if (statSync(inside).isFile()) return inside;
    }
  } catch {
    // not a directory with an interpreter: starting it names the bad path
  }
  return located;
}

/** What the interpreter answered, and what this process read of its compiled harness. */
export interface PythonRuntime extends CachedRuntime {
  /** The compiled scripts, read from `bytecode` and checked against `compiled`, by file name; null to run the sources. */
  scripts: ReadonlyMap<string, Buffer> | null;
  /** Something the user should hear about the run's harness (it was compiled again because the cached one changed), or null. */
  warning: string | null;
}

/**
 * Prints what the sandbox must keep visible, then compiles the workers'
 * scripts into argv[1] (each source named after it as NAME.pyc, written
 * beside and renamed into place), so that no worker compiles them again,
 * with the SHA-256 of the bytes it wrote. Always compiled, never kept: a
 * file already there may be one something else wrote, and a probe runs only
 * when the cache has no entry (PYTHONHASHSEED=0 keeps the bytes the same
 * from one compile to the next).
 */
const PROBE_SCRIPT = [
  'import json, os, sys',
  'info = {"version": list(sys.version_info[:3]), "executable": sys.executable, "paths": [os.path.dirname(sys.executable), sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.realpath(sys.executable)] + [p for p in sys.path if p], "bytecode": None, "compiled": None}',
  `if len(sys.argv) > 2 and sys.version_info >= (${MIN_PYTHON.join(', ')}):`,
  '    try:',
  '        import hashlib, py_compile',
  '        target = sys.argv[1]',
  '        os.makedirs(target, mode=0o700, exist_ok=True)',
  '        hashes = {}',
  '        for source in sys.argv[2:]:',
  '            name = os.path.basename(source) + "c"',
  '            compiled = os.path.join(target, name)',
  '            partial = "%s.%d.tmp" % (compiled, os.getpid())',
  '            py_compile.compile(source, cfile=partial, dfile=os.path.basename(source), doraise=True)',
  '            with open(partial, "rb") as handle:',
  '                hashes[name] = hashlib.sha256(handle.read()).hexdigest()',
  '            os.replace(partial, compiled)',
  '        info["bytecode"] = target',
  '        info["compiled"] = hashes',
  '    except Exception:',
  '        pass',
  'print("GATEKEPT-PROBE " + json.dumps(info))',
].join('\n');

const runtimes = new Map<string, Promise<PythonRuntime>>();

/**
 * Run the interpreter once to learn its version and the directories it reads
 * (the sandbox must keep them visible). Something that does not answer as a
 * Python (`/bin/false`, a shell script, a broken venv) is bad input, exit 2.
 * Once per process: the compiled harness it gives is checked then, and the
 * bytes checked are what every session of the process runs.
 */
export function probePython(python: string, minimumVersion: PythonVersion = MIN_PYTHON): Promise<PythonRuntime> {
  const key = `${python}\0${minimumVersion.join('.')}`;
  let probe = runtimes.get(key);
  if (!probe) {
    probe = resolveRuntime(python, minimumVersion);
    runtimes.set(key, probe);
    probe.catch(() => runtimes.delete(key));
  }
  return probe;
}

async function resolveRuntime(python: string, minimumVersion: readonly [number, number]): Promise<PythonRuntime> {
  const cached = readCachedRuntime(python, minimumVersion);
  let warning: string | null = null;
  if (cached) {
    if (!cached.bytecode) return { ...cached, scripts: null, warning: null };
    const loaded = loadCompiled(cached);
    if ('scripts' in loaded) return { ...cached, scripts: loaded.scripts, warning: null };
    // Changed since it was compiled: by a verifier run without the sandbox,
    // or anything else that can write the user's cache. Never run it.
    warning = `the compiled harness in ${cached.bytecode} changed after gatekept compiled it (${loaded.changed}); compiled it again`;
  }
  const fresh = await probeOnce(python, minimumVersion);
  if (!fresh.bytecode) return { ...fresh, scripts: null, warning };
  const loaded = loadCompiled(fresh);
  if ('scripts' in loaded) return { ...fresh, scripts: loaded.scripts, warning };
  // Changed between the probe's write and this read: something is rewriting it as it goes.
  return {
    ...fresh,
    scripts: null,
    warning: `the compiled harness in ${fresh.bytecode} changed as soon as it was compiled (${loaded.changed}); running the harness from its sources`,
  };
}

function probeOnce(python: string, minimumVersion: readonly [number, number]): Promise<CachedRuntime> {
  const wanted = versionText(minimumVersion);
  return new Promise((resolve, reject) => {
    execFile(
      python,
      // The flags every process of ours starts with, so an interpreter that cannot take them fails here.
      ['-B', '-X', 'utf8', '-c', PROBE_SCRIPT, bytecodeDir(python, minimumVersion), ...COMPILED_SOURCES.map((name) => path.join(PACKAGE_ROOT, 'python', name))],
      {
        timeout: 30_000,
        env: { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', PYTHONHASHSEED: '0' },
        maxBuffer: 4 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = (error as NodeJS.ErrnoException | null)?.code;
        if (typeof code === 'string' && ['ENOENT', 'EACCES', 'ENOTDIR', 'EISDIR', 'ENOEXEC'].includes(code)) {
          reject(
            new GatekeptError('PYTHON_NOT_FOUND', `cannot run Python interpreter '${python}' (${code})`, {
              suggestion: `install Python ${wanted} or newer, or pass its path (or a virtualenv directory) with --python`,
            }),
          );
          return;
        }
        const line = String(stdout)
          .split('\n')
          .find((entry) => entry.startsWith('GATEKEPT-PROBE '));
        let parsed: { version: [number, number, number]; executable: string; paths: string[]; bytecode?: unknown; compiled?: unknown } | null = null;
        try {
          parsed = line
            ? (JSON.parse(line.slice('GATEKEPT-PROBE '.length)) as {
                version: [number, number, number];
                executable: string;
                paths: string[];
                bytecode?: unknown;
                compiled?: unknown;
              })
            : null;
        } catch {
          parsed = null;
        }
        if (!parsed) {
          const output = `${String(stderr)}\n${String(stdout)}`;
          if (/-X is reserved|unknown option.*-X/i.test(output)) {
            reject(
              new GatekeptError('PYTHON_TOO_OLD', `'${python}' does not take -X, so it is older than Python ${wanted}`, {
                suggestion: `pass a Python ${wanted} or newer with --python`,
              }),
            );
            return;
          }
          const banner = /\bPython (\d+)\.(\d+)(?:\.\d+)?/.exec(output);
          if (banner && olderThan(Number(banner[1]), Number(banner[2]), minimumVersion)) {
            reject(
              new GatekeptError('PYTHON_TOO_OLD', `'${python}' is ${banner[0]}, which is older than Python ${wanted}`, {
                suggestion: `pass a Python ${wanted} or newer with --python`,
              }),
            );
            return;
          }
          const tail = String(stderr).trim().split('\n').filter(Boolean).slice(-5);
          reject(
            new GatekeptError('PYTHON_NOT_FOUND', `'${python}' does not run as a Python interpreter${error ? ` (${describe(error)})` : ''}`, {
              details: tail,
              suggestion: `pass a Python ${wanted} or newer (or a virtualenv directory) with --python`,
            }),
          );
          return;
        }
        const [major, minor] = parsed.version;
        if (olderThan(major, minor, minimumVersion)) {
          reject(
            new GatekeptError('PYTHON_TOO_OLD', `'${python}' is Python ${parsed.version.join('.')}, which is older than Python ${wanted}`, {
              suggestion: `pass a Python ${wanted} or newer with --python`,
            }),
          );
          return;
        }
        const executable = typeof parsed.executable === 'string' && path.isAbsolute(parsed.executable) ? parsed.executable : python;
        const compiled = isRecord(parsed.compiled) ? (parsed.compiled as Record<string, string>) : null;
        const bytecode = typeof parsed.bytecode === 'string' && parsed.bytecode === bytecodeDir(python, minimumVersion) && compiled ? parsed.bytecode : null;
        const runtime: CachedRuntime = {
          python,
          executable,
          version: parsed.version,
          paths: [...new Set(parsed.paths.filter((entry) => path.isAbsolute(entry)))],
          bytecode,
          compiled: bytecode ? compiled : null,
        };
        writeCachedRuntime(runtime, minimumVersion);
        resolve(runtime);
      },
    );
  });
}

function describe(error: Error): string {
  const withCode = error as Error & { code?: unknown; signal?: unknown; killed?: boolean };
  if (withCode.killed) return 'it did not answer within 30 s';
  if (typeof withCode.signal === 'string' && withCode.signal) return `killed by ${withCode.signal}`;
  if (typeof withCode.code === 'number') return `exit status ${withCode.code}`;
  return error.message;
}
