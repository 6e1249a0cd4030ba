import { spawn } from 'node:child_process';
import { accessSync, constants, copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, realpathSync, renameSync, writeFileSync, type Stats } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatekeptError } from '../errors.js';
import { PACKAGE_ROOT } from '../paths.js';
import { seccompProgram } from './seccomp.js';

/**
 * The boundary around every Python process that imports or calls code we did
 * not write. With bubblewrap, the process runs in fresh user, PID, network,
 * IPC, UTS and mount namespaces: the filesystem is read-only apart from its
 * own working directory, homes and /run are hidden, gatekept's processes and
 * their /proc entries do not exist for it, there is no network to reach (nor
 * a host service's unix socket: see seccomp.ts), and the whole sandbox dies
 * with the process that started it. The harness's
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
  /** Set when the verifier runs unisolated, or isolated without the seccomp filter. */
  readonly warning: string | null;
  /** Set where this machine has a seccomp filter (see seccomp.ts) that bubblewrap or the kernel refused: the sandbox runs without it. */
  readonly filterRefused?: boolean;
  /** Set where this bubblewrap or kernel lacks --disable-userns: the sandbox holds without it, one namespace layer less. */
  readonly withoutDisableUserns?: boolean;
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

/** Asking for no sandbox is allowed, and said on every run all the same. */
export const NO_SANDBOX_WARNING =
  "the verifier is NOT isolated: --sandbox none was asked for, so it runs with your user's access to files and network, guarded only by an in-process audit hook that code aware of it can switch off; use it only for verifiers you trust";

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

/** Runs bubblewrap once; `filter` is a seccomp program it reads from a pipe on fd 3. */
function run(command: string, args: readonly string[], filter: Buffer | null = null): Promise<{ ok: boolean; stderr: string }> {
  return new Promise((resolve) => {
    const argv = filter === null ? [...args] : [...args.slice(0, args.indexOf('--')), '--seccomp', '3', ...args.slice(args.indexOf('--'))];
    const child = spawn(command, argv, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdio: ['ignore', 'ignore', 'pipe', ...(filter === null ? [] : ['pipe' as const])], timeout: 10_000 });
    if (filter !== null) {
      const pipe = child.stdio[3] as NodeJS.WritableStream | null;
      pipe?.on('error', () => undefined);
      pipe?.end(filter);
    }
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    child.on('error', (error) => resolve({ ok: false, stderr: String(error) }));
    child.on('close', (code) => resolve({ ok: code === 0, stderr: stderr.trim() }));
  });
}

interface BwrapProbe {
  bwrap: string | null;
  problem: string | null;
  /** The filter could not be installed, though this machine has one. */
  filterRefused: boolean;
  /** Older kernels and bubblewraps lack --disable-userns. */
  withoutDisableUserns: boolean;
}

const probes = new Map<string, Promise<BwrapProbe>>();
/** Keys of probes that have answered: nothing left to hope for (see hopedSandbox). */
const answered = new Set<string>();
/** The first worker started in the hoped sandbox, by PATH: whether it came up. */
const hopedLaunches = new Map<string, Promise<boolean>>();

/**
 * Tell the probe that a worker is starting in the hoped sandbox. A worker
 * that comes up in it has shown what the probe would (bubblewrap builds the
 * namespaces with the filter installed), so the probe waits for it and runs
 * only if it fails. Call it in the same turn of the event loop as the
 * openSandbox it should spare.
 */
export function hopedLaunch(started: Promise<unknown>): void {
  const key = process.env.PATH ?? '';
  if (!hopedLaunches.has(key)) hopedLaunches.set(key, started.then(() => true, () => false));
}

/**
 * Whether bubblewrap exists and can build the namespaces we ask for, with
 * the seccomp filter installed, once per process. A kernel that refuses the
 * filter still gets the namespaces, and every run says what is missing.
 */
function probeBwrap(): Promise<BwrapProbe> {
  const key = process.env.PATH ?? '';
  let probe = probes.get(key);
  if (!probe) {
    probe = (async () => {
      const bwrap = findOnPath('bwrap');
      if (!bwrap) return { bwrap: null, problem: 'bwrap was not found on PATH', filterRefused: false, withoutDisableUserns: false };
      // A worker launched in the hoped sandbox in this turn of the event loop is registered by the next.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const launch = hopedLaunches.get(key);
      if (launch && (await launch)) return { bwrap, problem: null, filterRefused: false, withoutDisableUserns: false };
      // Through a pipe, so a run killed while it probes leaves no file behind.
      const filter = seccompProgram();
      let first = null as { ok: boolean; stderr: string } | null;
      for (const withoutDisableUserns of [false, true]) {
        const trial = (withFilter: boolean) => run(bwrap, [...baseArgs(false, withoutDisableUserns), '--', '/bin/sh', '-c', 'exit 0'], withFilter ? filter : null);
        if (filter && (await trial(true)).ok) return { bwrap, problem: null, filterRefused: false, withoutDisableUserns };
        const plain = await trial(false);
        first ??= plain;
        if (plain.ok) return { bwrap, problem: null, filterRefused: filter !== null, withoutDisableUserns };
      }
      return { bwrap: null, problem: `bwrap cannot create namespaces here: ${first?.stderr || 'it failed'}`, filterRefused: false, withoutDisableUserns: false };
    })().finally(() => answered.add(key));
    probes.set(key, probe);
  }
  return probe;
}

/** Said on every run whose sandbox lacks the filter although this machine has one. */
export const NO_FILTER_WARNING =
  'the sandbox runs without its seccomp filter (this kernel or bubblewrap refused it): the verifier has no network, but unix sockets of host services outside the hidden directories stay reachable';

/** Choose the sandbox for a run. 'bwrap' refuses to run without it; 'auto' falls back with a warning. */
export async function openSandbox(mode: SandboxMode = 'auto'): Promise<Sandbox> {
  if (mode === 'none') return { kind: 'none', bwrap: null, warning: NO_SANDBOX_WARNING };
  const { bwrap, problem, filterRefused, withoutDisableUserns } = await probeBwrap();
  if (bwrap) return { kind: 'bwrap', bwrap, warning: filterRefused ? NO_FILTER_WARNING : null, filterRefused, withoutDisableUserns };
  if (mode === 'bwrap') {
    throw new GatekeptError('SANDBOX_UNAVAILABLE', `--sandbox bwrap was asked for, but ${problem ?? 'bubblewrap is unavailable'}`, {
      suggestion: 'install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow unprivileged user namespaces, or pass --sandbox auto',
    });
  }
  return { kind: 'none', bwrap: null, warning: `${NOT_ISOLATED_WARNING} (${problem ?? 'unavailable'})` };
}

/**
 * The sandbox the probe confirms where everything works: a worker starts in
 * it while the probe runs, instead of after it, and is kept only if the probe
 * agrees (see openVerifierSession). Null where there is nothing to hope for:
 * no sandbox asked for, no bubblewrap to run, or a probe that has answered.
 */
export function hopedSandbox(mode: SandboxMode = 'auto'): Sandbox | null {
  if (mode === 'none' || answered.has(process.env.PATH ?? '')) return null;
  const bwrap = findOnPath('bwrap');
  return bwrap ? { kind: 'bwrap', bwrap, warning: null, filterRefused: false, withoutDisableUserns: false } : null;
}

/** Whether two sandboxes start processes alike. */
export function sameSandbox(a: Sandbox, b: Sandbox): boolean {
  return (
    a.kind === b.kind &&
    a.bwrap === b.bwrap &&
    (a.filterRefused ?? false) === (b.filterRefused ?? false) &&
    (a.withoutDisableUserns ?? false) === (b.withoutDisableUserns ?? false)
  );
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

function baseArgs(shareNet: boolean, withoutDisableUserns: boolean): string[] {
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
 * Files readable only by their owner, which the sandbox's user is when
 * gatekept runs as root (its uid maps to the real one): password hashes,
 * sudo rules, SSH host keys, TLS private keys. Covered with /dev/null or an
 * empty directory where they exist.
 */
const OWNER_ONLY_SECRETS = ['/etc/shadow', '/etc/shadow-', '/etc/gshadow', '/etc/gshadow-', '/etc/sudoers', '/etc/sudoers.d', '/etc/ssh', '/etc/ssl/private'];

/**
 * bubblewrap arguments that hide `entry`: an empty tmpfs over a directory,
 * /dev/null over anything else (over a regular file only, with `filesOnly`);
 * none for what does not exist.
 */
function coverArgs(entry: string, filesOnly: boolean): string[] {
  let info: Stats;
  try {
    info = lstatSync(entry);
  } catch {
    return [];
  }
  if (info.isDirectory()) return ['--tmpfs', entry];
  return !filesOnly || info.isFile() ? ['--ro-bind', '/dev/null', entry] : [];
}

function maskSecrets(): string[] {
  const masks: string[] = [];
  for (const entry of OWNER_ONLY_SECRETS) {
    // The mount lands where a symlink points, so mask the real path.
    const target = real(entry);
    if (target && target !== '/') masks.push(...coverArgs(target, false));
  }
  return masks;
}

/**
 * Our Python scripts appear inside as an ordinary application's files
 * (`/srv/app/main.py` for the harness), so the worker's command line and
 * `__file__` do not say they belong to an audit.
 */
function neutralScripts(command: readonly string[], scratch: string): { args: string[]; renamed: Map<string, string> } {
  const base = ['/srv', '/mnt', '/opt'].find((dir) => {
    try {
      return lstatSync(dir).isDirectory();
    } catch {
      return false;
    }
  });
  const renamed = new Map<string, string>();
  const source = path.join(PACKAGE_ROOT, 'python');
  // Scripts compiled ahead (see runtime-cache.ts) sit in the user's cache,
  // which the sandbox hides: they come in beside the sources.
  const compiled = [...new Set(command.filter((arg) => arg.endsWith('.pyc')).map((arg) => path.dirname(arg)))];
  if (!base) return { args: [source, ...compiled].flatMap((dir) => ['--ro-bind', dir, dir]), renamed };
  const app = path.join(base, 'app');
  const args = ['--tmpfs', base];
  // Bound from copies in the run's own directory: the sandbox's mount table
  // names where each bind comes from, and the package's path may say gatekept.
  const copies = path.join(scratch, 'app');
  mkdirSync(copies, { recursive: true, mode: 0o700 });
  const bind = (dir: string, name: string, suffix: string): void => {
    const shown = name === `harness${suffix}` ? `main${suffix}` : name;
    const copy = path.join(copies, shown);
    if (!existsSync(copy)) copyFileSync(path.join(dir, name), copy);
    args.push('--ro-bind', copy, path.join(app, shown));
    renamed.set(path.join(dir, name), path.join(app, shown));
  };
  // A process running a compiled script (the harness) gets the compiled
  // files alone: a source beside its compiled file would be imported instead
  // (and compiled again by every worker), and the other scripts are not its.
  if (compiled.length > 0) {
    for (const dir of compiled) for (const name of readdirSync(dir)) if (name.endsWith('.pyc')) bind(dir, name, '.pyc');
  } else {
    for (const name of readdirSync(source)) if (name.endsWith('.py')) bind(source, name, '.py');
  }
  return { args, renamed };
}

/** A home directory: a hidden root (`/root`, ours) or one of `/home`'s children (someone's, when we run as root). */
function isHome(entry: string, hidden: readonly string[]): boolean {
  return hidden.includes(entry) || path.dirname(entry) === real('/home');
}

/**
 * bubblewrap arguments that cover the dot-entries of `dir`. A dot-directory
 * that holds a path that must stay readable (a venv in ~/.cache) is covered
 * all the same, unless that path is the directory itself: the caller binds
 * the needed paths back afterwards, on top of the cover (a later mount hides
 * an earlier one, so the order matters), and its other contents
 * (~/.cache/huggingface/token) stay hidden.
 */
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
    if (!readable.includes(entry)) masks.push(...coverArgs(entry, true));
  }
  return masks;
}

/**
 * The child's fd on which bubblewrap reads the seccomp filter: past stdin,
 * stdout, stderr and the two protocol pipes. bubblewrap closes it once read,
 * so the sandboxed process never holds it.
 */
export const SECCOMP_FD = 5;

export interface BwrapLaunch {
  command: string;
  args: string[];
  /** A file holding the seccomp program, to be opened and passed as fd SECCOMP_FD; null when there is no filter. */
  seccompFile: string | null;
}

/** Write the filter into the scratch directory, whole: a concurrent launch reading the previous copy keeps its own inode. */
function writeSeccompFile(scratch: string): string | null {
  const program = seccompProgram();
  if (!program) return null;
  const file = path.join(scratch, 'seccomp.bpf');
  const partial = `${file}.${process.pid}.tmp`;
  writeFileSync(partial, program);
  renameSync(partial, file);
  return file;
}

/** The bubblewrap command line that runs `command args` in the layout. */
export function bwrapCommand(sandbox: Sandbox, layout: SandboxLayout, command: string, args: readonly string[]): BwrapLaunch {
  if (sandbox.kind !== 'bwrap' || !sandbox.bwrap) return { command, args: [...args], seccompFile: null };
  const argv = baseArgs(layout.shareNet ?? false, sandbox.withoutDisableUserns ?? false);
  const hidden = hiddenRoots();
  for (const root of hidden) argv.push('--tmpfs', root);
  argv.push(...maskSecrets());
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
    // hidden. What the interpreter needs inside one (a venv in ~/.cache) is
    // a longer entry, so it is bound back after the cover, and alone.
    if (isHome(entry, hidden)) argv.push(...maskDotEntries(entry, readable));
  }
  // The parent's command line names the host's directories (and gatekept):
  // an ordinary init's is shown instead, under both names the kernel gives it.
  const cmdline = path.join(layout.scratch, 'init-cmdline');
  writeFileSync(cmdline, '/sbin/init\0');
  argv.push('--ro-bind', cmdline, '/proc/1/cmdline', '--ro-bind', cmdline, '/proc/1/task/1/cmdline');
  const scripts = neutralScripts(args, layout.scratch);
  argv.push(...scripts.args);
  const seccompFile = sandbox.filterRefused ? null : writeSeccompFile(layout.scratch);
  if (seccompFile) argv.push('--seccomp', String(SECCOMP_FD));
  argv.push('--chdir', SANDBOX_HOME, '--', command, ...args.map((arg) => scripts.renamed.get(arg) ?? arg));
  return { command: sandbox.bwrap, args: argv, seccompFile };
}
