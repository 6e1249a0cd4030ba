import { spawn } from 'node:child_process';
import {
  accessSync,
  constants,
  copyFileSync,
  linkSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  renameSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatekeptError } from '../errors.js';
import { PACKAGE_ROOT } from '../paths.js';
import { hostBinds } from './host-binds.js';
import { overlayHost } from './overlay-host.js';
import { seccompProgram } from './seccomp.js';

/**
 * The boundary around every Python process that imports or calls code we did
 * not write. With bubblewrap, the process runs in fresh user, PID, network,
 * IPC, UTS and mount namespaces: the filesystem is read-only apart from its
 * own working directory, homes and /run are hidden, gatekept's processes and
 * their /proc entries do not exist for it, there is no network to reach (nor
 * a host service's unix socket: the sockets the kernel lists under what is
 * bound are covered, see seccomp.ts), and the whole sandbox dies with the
 * process that started it. The harness's
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
  /**
   * Set where the host directories can be shown through overlays (see
   * host-binds.ts), with the `unshare` and `nsenter` that make and enter
   * their namespace (see overlay-host.ts); elsewhere the verifier gets no
   * unix socket, so that no host service's can be reached.
   */
  readonly overlays?: boolean;
  readonly overlayTools?: OverlayTools | null;
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
/**
 * Sizes of the sandbox's private scratch file systems. They live in memory
 * and vanish with the sandbox, so a verifier cannot fill the host's disk nor
 * leave anything behind for gatekept to clean up; the bound keeps a runaway
 * writer from taking the host's memory instead.
 */
const HOME_TMPFS_BYTES = 1 << 30;
const TMP_TMPFS_BYTES = 1 << 30;
const SHM_TMPFS_BYTES = 1 << 30;

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
    const child = spawn(command, argv, {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      stdio: ['ignore', 'ignore', 'pipe', ...(filter === null ? [] : ['pipe' as const])],
      timeout: 10_000,
    });
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
  /** What mounts the overlays (see host-binds.ts), where they can be made here; else null. */
  overlayTools: OverlayTools | null;
}

export interface OverlayTools {
  unshare: string;
  nsenter: string;
}

function findOverlayTools(): OverlayTools | null {
  const unshare = findOnPath('unshare');
  const nsenter = findOnPath('nsenter');
  return unshare && nsenter ? { unshare, nsenter } : null;
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
  if (!hopedLaunches.has(key))
    hopedLaunches.set(
      key,
      started.then(
        () => true,
        () => false,
      ),
    );
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
      const tools = findOverlayTools();
      if (!bwrap) return { bwrap: null, problem: 'bwrap was not found on PATH', filterRefused: false, withoutDisableUserns: false, overlayTools: null };
      // A worker launched in the hoped sandbox in this turn of the event loop is registered by the next.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const launch = hopedLaunches.get(key);
      if (launch && (await launch)) return { bwrap, problem: null, filterRefused: false, withoutDisableUserns: false, overlayTools: tools };
      // Through a pipe, so a run killed while it probes leaves no file behind.
      const filter = seccompProgram();
      let first = null as { ok: boolean; stderr: string } | null;
      for (const withoutDisableUserns of [false, true]) {
        const trial = (withFilter: boolean) => run(bwrap, [...baseArgs(withoutDisableUserns), '--', '/bin/sh', '-c', 'exit 0'], withFilter ? filter : null);
        const withFilter = filter !== null && (await trial(true)).ok;
        const plain = withFilter ? { ok: true, stderr: '' } : await trial(false);
        first ??= plain;
        if (plain.ok) {
          const overlays = tools !== null && (await overlaysWork(tools, bwrap, withoutDisableUserns));
          return { bwrap, problem: null, filterRefused: filter !== null && !withFilter, withoutDisableUserns, overlayTools: overlays ? tools : null };
        }
      }
      return {
        bwrap: null,
        problem: `bwrap cannot create namespaces here: ${first?.stderr || 'it failed'}`,
        filterRefused: false,
        withoutDisableUserns: false,
        overlayTools: null,
      };
    })().finally(() => answered.add(key));
    probes.set(key, probe);
  }
  return probe;
}

/** Whether an overlay of a directory can be mounted and bound into the sandbox here (see host-binds.ts). */
async function overlaysWork(tools: OverlayTools, bwrap: string, withoutDisableUserns: boolean): Promise<boolean> {
  try {
    const host = await overlayHost(tools.unshare, tools.nsenter);
    const source = path.join(host.dir, 'probe');
    mkdirSync(source, { recursive: true });
    const release = host.acquire();
    try {
      const staged = host.stagedPath(source);
      await host.ready([source]);
      const launch = host.launch(bwrap, [...baseArgs(withoutDisableUserns), '--ro-bind', staged, source, '--', '/bin/sh', '-c', 'exit 0']);
      return (await run(launch.command, launch.args)).ok;
    } finally {
      release();
    }
  } catch {
    return false;
  }
}

/** Said on every run whose sandbox cannot show directories through overlays: no unix socket for the verifier. */
export const NO_OVERLAY_WARNING =
  'the sandbox cannot show directories through overlays here (no unshare or nsenter, or a kernel without unprivileged overlayfs), so the verifier may open no unix socket: multiprocessing managers and fork servers will fail';

/** Said on every run whose sandbox lacks the filter although this machine has one. */
export const NO_FILTER_WARNING =
  'the sandbox runs without its seccomp filter (this kernel or bubblewrap refused it): the verifier has no network, but unix sockets of host services outside the hidden directories stay reachable';

/** Choose the sandbox for a run. 'bwrap' refuses to run without it; 'auto' falls back with a warning. */
export async function openSandbox(mode: SandboxMode = 'auto'): Promise<Sandbox> {
  if (mode === 'none') return { kind: 'none', bwrap: null, warning: NO_SANDBOX_WARNING };
  const { bwrap, problem, filterRefused, withoutDisableUserns, overlayTools } = await probeBwrap();
  if (bwrap) {
    const overlays = overlayTools !== null;
    const warning = filterRefused ? NO_FILTER_WARNING : overlays ? null : NO_OVERLAY_WARNING;
    return { kind: 'bwrap', bwrap, warning, filterRefused, withoutDisableUserns, overlays, overlayTools };
  }
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
  const overlayTools = findOverlayTools();
  return bwrap
    ? { kind: 'bwrap', bwrap, warning: null, filterRefused: false, withoutDisableUserns: false, overlays: overlayTools !== null, overlayTools }
    : null;
}

/** Whether two sandboxes start processes alike. */
export function sameSandbox(a: Sandbox, b: Sandbox): boolean {
  return (
    a.kind === b.kind &&
    a.bwrap === b.bwrap &&
    (a.filterRefused ?? false) === (b.filterRefused ?? false) &&
    (a.withoutDisableUserns ?? false) === (b.withoutDisableUserns ?? false) &&
    (a.overlays ?? false) === (b.overlays ?? false)
  );
}

/**
 * The host's own name, which the verifier would see in training on this
 * machine: a constant such as `localhost` would tell it that it is audited.
 * Only the characters a host name may hold are kept.
 */
const SANDBOX_HOSTNAME =
  os
    .hostname()
    .replace(/[^A-Za-z0-9.-]/g, '')
    .slice(0, 63) || 'localhost';

function baseArgs(withoutDisableUserns: boolean): string[] {
  return [
    // Root does not get a user namespace from --unshare-all alone.
    '--unshare-all',
    '--unshare-user',
    '--uid',
    String(SANDBOX_UID),
    '--gid',
    String(SANDBOX_UID),
    ...(withoutDisableUserns ? [] : ['--disable-userns']),
    '--die-with-parent',
    // A session of its own: no controlling terminal to push input into (TIOCSTI).
    '--new-session',
    '--hostname',
    SANDBOX_HOSTNAME,
    ...systemArgs(),
    '--dev',
    '/dev',
    '--proc',
    '/proc',
  ];
}

/**
 * The root starts empty (bubblewrap's own tmpfs) and only this is bound in,
 * read-only: the system's programs and libraries, and the few files of /etc
 * that the C library and Python read. Everything else of the host (homes,
 * /run's service sockets, /var, /sys, /srv, /opt, /mnt, other users' files)
 * does not exist inside, so nothing is hidden by a list that could miss an
 * entry.
 */
function systemArgs(): string[] {
  const args: string[] = ['--ro-bind', '/usr', '/usr'];
  for (const name of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const entry = `/${name}`;
    const info = lstatOrNull(entry);
    if (!info) continue;
    // Merged /usr: the top-level directories are links into it.
    if (info.isSymbolicLink()) args.push('--symlink', readlinkSync(entry), entry);
    else if (info.isDirectory()) args.push('--ro-bind', entry, entry);
  }
  for (const name of ETC_ENTRIES) {
    const entry = path.join('/etc', name);
    // Bound by its real path (/etc/localtime links into /usr/share/zoneinfo):
    // the link itself would dangle in a root without its target's directory.
    if (existsSync(entry)) args.push('--ro-bind', entry, entry);
  }
  return args;
}

/**
 * What of /etc an ordinary Python program reads: the dynamic loader's cache,
 * name-service and host files, time zone, MIME types, the system's identity,
 * the CA certificates (public; /etc/ssl/private is not among them), and the
 * alternatives that some of /usr/bin links through. passwd and group are
 * written for the sandbox's own user instead of the host's accounts.
 */
const ETC_ENTRIES = [
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'alternatives',
  'nsswitch.conf',
  'host.conf',
  'hosts',
  'gai.conf',
  'protocols',
  'services',
  'localtime',
  'timezone',
  'mime.types',
  'os-release',
  'ssl/certs',
  'ssl/openssl.cnf',
  'ca-certificates',
  'ca-certificates.conf',
  'pki/tls/certs',
  'pki/ca-trust',
];

function lstatOrNull(entry: string): Stats | null {
  try {
    return lstatSync(entry);
  } catch {
    return null;
  }
}

export interface SandboxLayout {
  /** Host directory for gatekept's own files about the sandbox; never mounted writable, nor reachable from inside. */
  scratch: string;
  /**
   * Host paths the process must read (the interpreter and its environment,
   * the verifier's files, directories the user names), bound read-only at
   * their own paths: the sandbox sees nothing else of the host.
   */
  readable: readonly string[];
}

/**
 * A hard link where the file system allows one (it costs a fraction of a
 * copy, and every launch makes one per script), else a copy. Either is bound
 * read-only, and the run's directory, not the source, is what the sandbox's
 * mount table names.
 */
function linkOrCopy(source: string, target: string): void {
  try {
    linkSync(source, target);
  } catch {
    copyFileSync(source, target);
  }
}

/**
 * Our Python scripts appear inside as an ordinary application's files
 * (`/srv/app/main.py` for the harness), so the worker's command line and
 * `__file__` do not say they belong to an audit. They are bound from copies
 * in the run's own directory: the sandbox's mount table names where each
 * bind comes from, and the package's path may say gatekept.
 */
function neutralScripts(command: readonly string[], scratch: string): { args: string[]; renamed: Map<string, string> } {
  const renamed = new Map<string, string>();
  const source = path.join(PACKAGE_ROOT, 'python');
  // Scripts compiled ahead (see runtime-cache.ts) sit in the user's cache:
  // they come in beside the sources.
  const compiled = [...new Set(command.filter((arg) => arg.endsWith('.pyc')).map((arg) => path.dirname(arg)))];
  const app = '/srv/app';
  // One directory of copies per kind of process, bound whole: one mount
  // instead of one per file, and nothing of the other kind's files in it.
  const copies = path.join(scratch, compiled.length > 0 ? 'app' : 'app-source');
  mkdirSync(copies, { recursive: true, mode: 0o700 });
  const copy = (dir: string, name: string, suffix: string): void => {
    const shown = name === `harness${suffix}` ? `main${suffix}` : name;
    const target = path.join(copies, shown);
    if (!existsSync(target)) linkOrCopy(path.join(dir, name), target);
    renamed.set(path.join(dir, name), path.join(app, shown));
  };
  // A process running a compiled script (the harness) gets the compiled
  // files alone: a source beside its compiled file would be imported instead
  // (and compiled again by every worker), and the other scripts are not its.
  if (compiled.length > 0) {
    for (const dir of compiled) for (const name of readdirSync(dir)) if (name.endsWith('.pyc')) copy(dir, name, '.pyc');
  } else {
    for (const name of readdirSync(source)) if (name.endsWith('.py')) copy(source, name, '.py');
  }
  return { args: ['--ro-bind', copies, app], renamed };
}

/** The sandbox's own accounts: its user and root, none of the host's. */
function accountFiles(scratch: string): string[] {
  const passwd = path.join(scratch, 'passwd');
  const group = path.join(scratch, 'group');
  writeFileSync(passwd, `root:x:0:0:root:/root:/bin/sh\nuser:x:${SANDBOX_UID}:${SANDBOX_UID}:user:${SANDBOX_HOME}:/bin/sh\n`);
  writeFileSync(group, `root:x:0:\nuser:x:${SANDBOX_UID}:\n`);
  return ['--ro-bind', passwd, '/etc/passwd', '--ro-bind', group, '/etc/group'];
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
  /** Call when the process has ended (or never started): the overlay namespace it was launched in may go. */
  release?: () => void;
}

/** Write the filter into the scratch directory, whole: a concurrent launch reading the previous copy keeps its own inode. */
function writeSeccompFile(scratch: string, unixStream: boolean): string | null {
  const program = seccompProgram(unixStream);
  if (!program) return null;
  // Named by variant: launches with and without unix sockets may share a scratch directory.
  const file = path.join(scratch, unixStream ? 'seccomp.bpf' : 'seccomp-nounix.bpf');
  const partial = `${file}.${process.pid}.tmp`;
  writeFileSync(partial, program);
  renameSync(partial, file);
  return file;
}

/**
 * The bubblewrap command line that runs `command args` in the layout. The
 * home, /tmp and /dev/shm are fresh file systems in memory that vanish with
 * the sandbox: gatekept never lists, reads or removes anything the verifier
 * could write, so a link or FIFO planted there cannot lead it anywhere.
 */
export async function bwrapCommand(sandbox: Sandbox, layout: SandboxLayout, command: string, args: readonly string[]): Promise<BwrapLaunch> {
  if (sandbox.kind !== 'bwrap' || !sandbox.bwrap) return { command, args: [...args], seccompFile: null };
  const tools = sandbox.overlays ? (sandbox.overlayTools ?? null) : null;
  const host = tools ? await overlayHost(tools.unshare, tools.nsenter) : null;
  const release = host?.acquire();
  const argv = baseArgs(sandbox.withoutDisableUserns ?? false);
  argv.push(...accountFiles(layout.scratch));
  argv.push('--size', String(HOME_TMPFS_BYTES), '--tmpfs', SANDBOX_HOME);
  argv.push('--size', String(TMP_TMPFS_BYTES), '--tmpfs', SANDBOX_TMP);
  // Writable shared memory, private to the sandbox (joblib and multiprocessing use it).
  argv.push('--size', String(SHM_TMPFS_BYTES), '--tmpfs', '/dev/shm');
  const binds = hostBinds(layout.readable, layout.scratch, host ? (source) => host.stagedPath(source) : null);
  argv.push(...binds.args);
  // The parent's command line names the host's directories (and gatekept):
  // an ordinary init's is shown instead, under both names the kernel gives it.
  const cmdline = path.join(layout.scratch, 'init-cmdline');
  writeFileSync(cmdline, '/sbin/init\0');
  argv.push('--ro-bind', cmdline, '/proc/1/cmdline', '--ro-bind', cmdline, '/proc/1/task/1/cmdline');
  const scripts = neutralScripts(args, layout.scratch);
  argv.push(...scripts.args);
  // Without overlays a host socket in a bound directory would be reachable: the verifier gets no unix socket at all.
  const seccompFile = sandbox.filterRefused ? null : writeSeccompFile(layout.scratch, host !== null);
  if (seccompFile) argv.push('--seccomp', String(SECCOMP_FD));
  argv.push('--chdir', SANDBOX_HOME, '--', command, ...args.map((arg) => scripts.renamed.get(arg) ?? arg));
  if (!host || !release) return { command: sandbox.bwrap, args: argv, seccompFile };
  try {
    await host.ready(binds.overlaid);
  } catch (error) {
    release();
    throw error;
  }
  return { ...host.launch(sandbox.bwrap, argv), seccompFile, release };
}
