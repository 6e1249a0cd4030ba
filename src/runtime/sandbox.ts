import { execFile } from 'node:child_process';
import { accessSync, constants, lstatSync, readdirSync, realpathSync, writeFileSync, type Stats } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatekeptError } from '../errors.js';
import { PACKAGE_ROOT } from '../paths.js';

/**
 * The boundary around every Python process that imports or calls code we did
 * not write. With bubblewrap, the process runs in fresh user, PID, network,
 * IPC, UTS and mount namespaces: the filesystem is read-only apart from its
 * own working directory, homes and /run are hidden, gatekept's processes and
 * their /proc entries do not exist for it, there is no network to reach, and
 * the whole sandbox dies with the process that started it. The harness's
 * audit hook then only reports attempts; it is no longer the boundary.
 *
 * Without bubblewrap (mode 'none', or 'auto' where it is missing or cannot
 * create namespaces) the processes run as before, guarded only by that
 * in-process hook, and every run says so.
 */

export const SANDBOX_MODES = ['auto', 'bwrap', 'none'] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];

export interface Sandbox {
  readonly kind: 'bwrap' | 'none';
  /** The bubblewrap binary, for kind 'bwrap'. */
  readonly bwrap: string | null;
  /** Set when the verifier runs unisolated although isolation was not refused outright. */
  readonly warning: string | null;
}

/** Where the sandboxed process finds its home and temporary directory. */
export const SANDBOX_HOME = '/home/user';
export const SANDBOX_TMP = '/tmp';
/**
 * An ordinary user id inside the sandbox's own user namespace, whatever user
 * runs gatekept (root included): it owns the sandbox's files but holds no
 * privilege outside, so it cannot raise its resource limits.
 */
const SANDBOX_UID = 1000;

export const NOT_ISOLATED_WARNING =
  "the verifier is NOT isolated: bubblewrap (bwrap) is not available, so it runs with your user's access to files and network, guarded only by an in-process audit hook; install bubblewrap, or pass --sandbox bwrap to require it";

function findOnPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

function run(command: string, args: readonly string[]): Promise<{ ok: boolean; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { timeout: 10_000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } }, (error, _stdout, stderr) => {
      resolve({ ok: !error, stderr: String(stderr).trim() });
    });
  });
}

/** Older kernels and bubblewraps lack --disable-userns; the sandbox holds without it, one namespace layer less. */
let withoutDisableUserns = false;

const probes = new Map<string, Promise<{ bwrap: string | null; problem: string | null }>>();

/** Whether bubblewrap exists and can build the namespaces we ask for, once per process. */
function probeBwrap(): Promise<{ bwrap: string | null; problem: string | null }> {
  const key = process.env.PATH ?? '';
  let probe = probes.get(key);
  if (!probe) {
    probe = (async () => {
      const bwrap = findOnPath('bwrap');
      if (!bwrap) return { bwrap: null, problem: 'bwrap was not found on PATH' };
      const trial = await run(bwrap, [...baseArgs(false), '--', '/bin/sh', '-c', 'exit 0']);
      if (trial.ok) return { bwrap, problem: null };
      withoutDisableUserns = true;
      const again = await run(bwrap, [...baseArgs(false), '--', '/bin/sh', '-c', 'exit 0']);
      return again.ok ? { bwrap, problem: null } : { bwrap: null, problem: `bwrap cannot create namespaces here: ${trial.stderr || 'it failed'}` };
    })();
    probes.set(key, probe);
  }
  return probe;
}

/** Choose the sandbox for a run. 'bwrap' refuses to run without it; 'auto' falls back with a warning. */
export async function openSandbox(mode: SandboxMode = 'auto'): Promise<Sandbox> {
  if (mode === 'none') return { kind: 'none', bwrap: null, warning: null };
  const { bwrap, problem } = await probeBwrap();
  if (bwrap) return { kind: 'bwrap', bwrap, warning: null };
  if (mode === 'bwrap') {
    throw new GatekeptError('SANDBOX_UNAVAILABLE', `--sandbox bwrap was asked for, but ${problem ?? 'bubblewrap is unavailable'}`, {
      suggestion: 'install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow unprivileged user namespaces, or pass --sandbox auto',
    });
  }
  return { kind: 'none', bwrap: null, warning: `${NOT_ISOLATED_WARNING} (${problem ?? 'unavailable'})` };
}

export function parseSandboxMode(value: string | undefined): SandboxMode {
  const mode = value ?? 'auto';
  if (!(SANDBOX_MODES as readonly string[]).includes(mode)) {
    throw new GatekeptError('BAD_ARGUMENT', `--sandbox ${mode} is not a sandbox mode`, {
      suggestion: `use one of ${SANDBOX_MODES.join(', ')}`,
    });
  }
  return mode as SandboxMode;
}

function baseArgs(shareNet: boolean): string[] {
  return [
    // Root does not get a user namespace from --unshare-all alone.
    '--unshare-all',
    '--unshare-user',
    ...(shareNet ? ['--share-net'] : []),
    '--uid', String(SANDBOX_UID),
    '--gid', String(SANDBOX_UID),
    ...(withoutDisableUserns ? [] : ['--disable-userns']),
    '--die-with-parent',
    '--hostname', 'localhost',
    '--ro-bind', '/', '/',
    '--dev', '/dev',
    '--proc', '/proc',
  ];
}

/** Existing, symlink-free form of a path, or null. */
function real(entry: string): string | null {
  try {
    return realpathSync(entry);
  } catch {
    return null;
  }
}

function isUnder(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

export interface SandboxLayout {
  /** Host directory mounted read-write as the sandbox's home and working directory. */
  home: string;
  /** Host directory mounted read-write as the sandbox's /tmp. */
  tmp: string;
  /** Host directory for gatekept's own files about the sandbox; never mounted. */
  scratch: string;
  /** Host paths the process needs to read that may lie under a hidden directory. */
  readable: readonly string[];
  /** Keep the host network (smoke's loopback server); everything else stays isolated. */
  shareNet?: boolean;
}

/** Directories that hold other people's secrets: homes, /run (service sockets, container secrets). */
function hiddenRoots(): string[] {
  const roots = ['/home', '/root', '/run', os.homedir()];
  return [...new Set(roots.map((root) => real(root)).filter((root): root is string => root !== null && root !== '/'))];
}

/**
 * Our Python scripts appear inside as an ordinary application's files
 * (`/srv/app/main.py` for the harness), so the worker's command line and
 * `__file__` do not say they belong to an audit.
 */
function neutralScripts(): { args: string[]; renamed: Map<string, string> } {
  const base = ['/srv', '/mnt', '/opt'].find((dir) => {
    try {
      return lstatSync(dir).isDirectory();
    } catch {
      return false;
    }
  });
  const renamed = new Map<string, string>();
  const source = path.join(PACKAGE_ROOT, 'python');
  if (!base) return { args: ['--ro-bind', source, source], renamed };
  const app = path.join(base, 'app');
  const args = ['--tmpfs', base];
  for (const name of readdirSync(source)) {
    if (!name.endsWith('.py')) continue;
    const target = path.join(app, name === 'harness.py' ? 'main.py' : name);
    args.push('--ro-bind', path.join(source, name), target);
    renamed.set(path.join(source, name), target);
  }
  return { args, renamed };
}

/** bubblewrap arguments that cover the dot-entries of `dir`, but those on the way to a path that must stay readable. */
function maskDotEntries(dir: string, readable: readonly string[]): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const masks: string[] = [];
  for (const name of names) {
    if (!name.startsWith('.')) continue;
    const entry = path.join(dir, name);
    if (readable.some((needed) => isUnder(needed, entry))) continue;
    let info: Stats;
    try {
      info = lstatSync(entry);
    } catch {
      continue;
    }
    if (info.isDirectory()) masks.push('--tmpfs', entry);
    else if (info.isFile()) masks.push('--ro-bind', '/dev/null', entry);
  }
  return masks;
}

/** The bubblewrap command line that runs `command args` in the layout. */
export function bwrapCommand(sandbox: Sandbox, layout: SandboxLayout, command: string, args: readonly string[]): { command: string; args: string[] } {
  if (sandbox.kind !== 'bwrap' || !sandbox.bwrap) return { command, args: [...args] };
  const argv = baseArgs(layout.shareNet ?? false);
  const hidden = hiddenRoots();
  for (const root of hidden) argv.push('--tmpfs', root);
  argv.push('--bind', layout.tmp, SANDBOX_TMP, '--bind', layout.home, SANDBOX_HOME);
  // Put back, read-only, what the process must read (the interpreter, the
  // verifier, its imports) where a hidden directory or the private /tmp
  // covers it; shortest first, so nested binds stay visible.
  const covered = [...hidden, SANDBOX_TMP, real(os.tmpdir()) ?? SANDBOX_TMP];
  const readable = [...new Set(layout.readable.map((entry) => real(entry)).filter((entry): entry is string => entry !== null))]
    .filter((entry) => covered.some((root) => isUnder(entry, root)))
    .sort((a, b) => a.length - b.length);
  for (const entry of readable) {
    argv.push('--ro-bind', entry, entry);
    // Run from a home directory, that whole home comes back; its dot-files
    // and dot-directories (~/.aws, ~/.ssh, ~/.netrc, ~/.config...) stay
    // hidden, except those the interpreter itself needs (a venv in ~/.cache).
    if (hidden.includes(entry)) argv.push(...maskDotEntries(entry, readable));
  }
  // The parent's command line names the host's directories (and gatekept):
  // an ordinary init's is shown instead.
  const cmdline = path.join(layout.scratch, 'init-cmdline');
  writeFileSync(cmdline, '/sbin/init\0');
  argv.push('--ro-bind', cmdline, '/proc/1/cmdline');
  const scripts = neutralScripts();
  argv.push(...scripts.args);
  argv.push('--chdir', SANDBOX_HOME, '--', command, ...args.map((arg) => scripts.renamed.get(arg) ?? arg));
  return { command: sandbox.bwrap, args: argv };
}
