import { lstatSync, readdirSync, readFileSync, realpathSync, writeFileSync, type Stats } from 'node:fs';
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
 * in a mount namespace of gatekept's own (see overlay-host.ts), where
 * bubblewrap then starts and binds them like any other directory. Where the kernel cannot make them, the sandbox refuses the
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

export interface HostBinds {
  args: string[];
  /** The directories shown through overlays: they must be mounted before the launch. */
  overlaid: string[];
}

/**
 * The read-only binds of the paths a process must read, and the covers over
 * what inside them is nobody's business. Each directory bound is searched
 * for dot-entries (`.env`, `.npmrc`, `.aws`, `.netrc`, `.git`...), which are
 * covered; a dot-entry that is a link is covered where it points, when that
 * is inside what is bound (elsewhere it dangles). A needed path under a cover
 * (a venv in `~/.cache`), or beyond a mount point inside what is bound, is
 * bound again after the covers, alone: a later mount hides an earlier one,
 * so the order matters. With `overlay` (where a directory's overlay is
 * mounted), every directory bound is its overlay, and a file is bound only
 * when it is a regular one.
 */
export function hostBinds(readable: readonly string[], scratch: string, overlay: ((source: string) => string) | null): HostBinds {
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
  const points = overlay ? mountPoints() : [];
  const beyondMount = (entry: string): boolean =>
    points.some((point) => isUnder(entry, point) && roots.some((root) => root !== point && isUnder(point, root) && isUnder(entry, root)));
  const again = entries.filter((entry) => !roots.includes(entry) && (covers.some((cover) => isUnder(entry, cover)) || beyondMount(entry)));

  const overlaid: string[] = [];
  const bind = (entry: string): string[] => {
    if (!overlay) return ['--ro-bind', entry, entry];
    const info = lstatOrNull(entry);
    if (info?.isDirectory()) {
      overlaid.push(entry);
      return ['--ro-bind', overlay(entry), entry];
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
  return { args, overlaid };
}
