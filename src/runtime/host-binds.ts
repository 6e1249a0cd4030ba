import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync, type Stats } from 'node:fs';
import path from 'node:path';

/**
 * How the host directories a sandboxed process must read (the interpreter's
 * environment, the verifier's files, the directories the user names) are
 * shown inside it, read-only, without any host service's unix socket.
 *
 * A read-only bind does not stop connect() on a socket file inside it, and
 * no list of sockets can be trusted: names can hold any byte, and a socket
 * can be bound or hard-linked in after the list was read. So each directory
 * is shown through an overlay file system whose only layer is that
 * directory: the files read the same, but every inode is the overlay's own,
 * and connect() reaches a listener only through the inode it was bound to.
 * A socket in such a directory, whatever its name, whenever it appeared and
 * however it was linked, refuses every connection. The overlays are mounted
 * in a mount namespace made for the launch (an unprivileged user namespace,
 * `unshare`), where bubblewrap then starts and binds them like any other
 * directory. Where the kernel cannot make them, the sandbox refuses the
 * verifier unix sockets altogether instead (see sandbox.ts).
 */

function lstatOrNull(entry: string): Stats | null {
  try {
    return lstatSync(entry);
  } catch {
    return null;
  }
}

/** Existing, symlink-free form of a path, or null. */
function real(entry: string): string | null {
  try {
    return realpathSync(entry);
  } catch {
    return null;
  }
}

export function isUnder(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/** Paths bound by the sandbox's system binds already: only root can put a socket there. */
const SYSTEM_ROOTS = ['/usr'];

/**
 * The mount points of this process's mount namespace. An overlay shows one
 * file system: a directory mounted inside a bound one would be missing from
 * its overlay, so it is shown through an overlay of its own. The kernel
 * escapes space, tab, newline and backslash as octal in this table.
 */
function mountPoints(): string[] {
  let table: string;
  try {
    table = readFileSync('/proc/self/mountinfo', 'latin1');
  } catch {
    return [];
  }
  const points: string[] = [];
  for (const line of table.split('\n')) {
    const field = line.split(' ')[4];
    if (!field?.startsWith('/')) continue;
    const unescaped = field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
    points.push(Buffer.from(unescaped, 'latin1').toString('utf8'));
  }
  return points;
}

/**
 * bubblewrap arguments that cover `entry`: an empty tmpfs over a directory,
 * an empty file over anything else (a device node would not open: the
 * sandbox's mounts carry nodev).
 */
function coverArgs(entry: string, empty: string): string[] {
  const info = lstatOrNull(entry);
  if (!info) return [];
  return info.isDirectory() ? ['--tmpfs', entry] : ['--ro-bind', empty, entry];
}

/** The overlays one launch mounts before bubblewrap starts: `m<i>` shows `sources[i]`. */
export interface Staging {
  dir: string;
  sources: string[];
}

export interface HostBinds {
  args: string[];
  /** Null when nothing is shown through an overlay (no directory to bind, or overlays off). */
  staging: Staging | null;
}

/**
 * The read-only binds of the paths a process must read, and the covers over
 * what inside them is nobody's business. Each directory bound is searched
 * for dot-entries (`.env`, `.npmrc`, `.aws`, `.netrc`, `.git`...), which are
 * covered; a dot-entry that is a link is covered where it points, when that
 * is inside what is bound (elsewhere it dangles). A needed path under a cover
 * (a venv in `~/.cache`), or beyond a mount point inside what is bound, is
 * bound again after the covers, alone: a later mount hides an earlier one,
 * so the order matters. With `overlays`, every directory bound is an overlay
 * staged in the scratch directory; a file is bound only when it is a regular
 * one.
 */
export function hostBinds(readable: readonly string[], scratch: string, overlays: boolean): HostBinds {
  const entries = [...new Set(readable.map((entry) => real(entry)).filter((entry): entry is string => entry !== null && entry !== '/'))]
    .filter((entry) => !SYSTEM_ROOTS.some((root) => isUnder(entry, root)))
    .sort((a, b) => a.length - b.length || (a < b ? -1 : 1));
  const roots = entries.filter((entry) => !entries.some((other) => other !== entry && isUnder(entry, other)));
  const covers: string[] = [];
  for (const root of roots) {
    let names: string[];
    try {
      names = lstatSync(root).isDirectory() ? readdirSync(root) : [];
    } catch {
      continue;
    }
    for (const name of names) {
      if (!name.startsWith('.')) continue;
      const entry = path.join(root, name);
      // A dot-directory that is itself what the process needs stays whole.
      if (entries.includes(entry)) continue;
      const target = lstatOrNull(entry)?.isSymbolicLink() ? real(entry) : entry;
      if (target && roots.some((bound) => isUnder(target, bound)) && !covers.includes(target)) covers.push(target);
    }
  }
  const points = overlays ? mountPoints() : [];
  const beyondMount = (entry: string): boolean =>
    points.some((point) => isUnder(entry, point) && roots.some((root) => root !== point && isUnder(point, root) && isUnder(entry, root)));
  const again = entries.filter((entry) => !roots.includes(entry) && (covers.some((cover) => isUnder(entry, cover)) || beyondMount(entry)));

  const sources: string[] = [];
  const bind = (entry: string): string[] => {
    if (!overlays) return ['--ro-bind', entry, entry];
    const info = lstatOrNull(entry);
    if (info?.isDirectory()) {
      sources.push(entry);
      return ['--ro-bind', `m${sources.length - 1}`, entry];
    }
    // A socket, FIFO or device bound alone would be reachable as it is.
    return info?.isFile() ? ['--ro-bind', entry, entry] : [];
  };
  const args: string[] = [];
  for (const root of roots) args.push(...bind(root));
  const empty = path.join(scratch, 'empty');
  if (covers.length > 0) writeFileSync(empty, '');
  for (const cover of covers) args.push(...coverArgs(cover, empty));
  for (const entry of again) args.push(...bind(entry));
  if (sources.length === 0) return { args, staging: null };
  const dir = stage(scratch, sources);
  // bubblewrap binds the overlays by their staged paths.
  return { args: args.map((arg) => (/^m\d+$/.test(arg) ? path.join(dir, arg) : arg)), staging: { dir, sources } };
}

/**
 * One directory per launch: `l<i>` links to the i-th source, `m<i>` is where
 * its overlay is mounted and `e` where an empty file system is (the overlay's
 * second layer: a layer of its own must not lie inside the one it shows).
 * Launches share the scratch directory, so each stages in a fresh one.
 */
function stage(scratch: string, sources: readonly string[]): string {
  mkdirSync(scratch, { recursive: true, mode: 0o700 });
  const dir = mkdtempSync(path.join(scratch, 'o-'));
  mkdirSync(path.join(dir, 'e'));
  sources.forEach((source, index) => {
    symlinkSync(source, path.join(dir, `l${index}`));
    mkdirSync(path.join(dir, `m${index}`));
  });
  return dir;
}

/**
 * Mounts the staged overlays, then becomes bubblewrap. The layers are named
 * relative to the staging directory, so no host path is parsed as a mount
 * option (a `:` or `,` in it would split it). dash exports PWD, which would
 * name the staging directory inside: it is unset before bubblewrap starts.
 */
const MOUNT_SCRIPT = [
  'cd "$1" || exit 125',
  'n=$2',
  'shift 2',
  'mount -t tmpfs -o size=4096,mode=0555 gatekept-empty e || exit 125',
  'i=0',
  'while [ "$i" -lt "$n" ]; do',
  '  mount -t overlay -o "lowerdir=l$i:e" overlay "m$i" || { echo "cannot show $(readlink "l$i") without its sockets: overlay refused" >&2; exit 125; }',
  '  i=$((i + 1))',
  'done',
  'cd /',
  'unset PWD OLDPWD',
  'exec "$@"',
].join('\n');

/** The command line that mounts the staged overlays and then runs `command args` (bubblewrap). */
export function withOverlays(unshare: string, staging: Staging, command: string, args: readonly string[]): { command: string; args: string[] } {
  return {
    command: unshare,
    args: ['--user', '--map-root-user', '--mount', '--', '/bin/sh', '-c', MOUNT_SCRIPT, 'sh', staging.dir, String(staging.sources.length), command, ...args],
  };
}

/** A staging directory for the probe: one empty directory shown through an overlay. */
export function probeStaging(scratch: string): Staging {
  const source = path.join(scratch, 'probe-source');
  if (!existsSync(source)) mkdirSync(source, { recursive: true, mode: 0o700 });
  return { dir: stage(scratch, [source]), sources: [source] };
}
