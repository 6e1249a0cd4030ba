import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { GatekeptError } from './errors.js';

/**
 * The one way gatekept opens a file the user names (rollouts, datasets,
 * question files, results, policies, seeds, attack files): it must be a
 * regular file, and no line of it (nor, for a file read whole, the file) may
 * be longer than a cap.
 *
 * A device, FIFO or socket is refused before a byte is read: /dev/zero never
 * ends, and a FIFO with no writer blocks forever. The check is fstat on the
 * descriptor that is then read, so the file cannot be swapped between the
 * check and the read; the open itself does not wait (O_NONBLOCK, which a
 * regular file ignores), so naming a FIFO cannot hang it either.
 *
 * The caps keep a line (or file) well inside what one JavaScript string can
 * hold (about 512 MiB): past that the runtime throws instead of reading it.
 */

/** The longest line a JSONL input may hold, in bytes. */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;
/** The largest file read whole (a policy, a seed, an attack file, a seed's verifier), in bytes. */
export const MAX_FILE_BYTES = 64 * 1024 * 1024;

const CHUNK_BYTES = 1 << 20;

/** How messages name an input file. */
export interface InputLabel {
  /** What the file is: "dataset", "results file", "policy file". */
  what: string;
  /** How messages show the path (default: as given). */
  shownAs?: string;
  /** How to fix the file, shown with every error about it. */
  suggestion?: string;
}

/** `64 MiB`, for messages. */
export function formatBytes(bytes: number): string {
  const mib = bytes / (1024 * 1024);
  return Number.isInteger(mib) ? `${mib} MiB` : `${bytes} bytes`;
}

function kindOf(stats: { isDirectory(): boolean; isFIFO(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean; isSocket(): boolean }): string {
  if (stats.isDirectory()) return 'a directory';
  if (stats.isFIFO()) return 'a FIFO (named pipe)';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  if (stats.isSocket()) return 'a socket';
  return 'not a regular file';
}

/** The error for a file that could not be opened: missing, unreadable. */
function cannotOpen(file: string, label: InputLabel, error: unknown): GatekeptError {
  const code = (error as NodeJS.ErrnoException).code;
  return new GatekeptError('FILE_NOT_FOUND', `cannot read ${label.what} ${label.shownAs ?? file}: ${code ?? String(error)}`, {
    ...(label.suggestion ? { suggestion: label.suggestion } : {}),
    cause: error,
  });
}

/** Opens `file` for reading; a path that is not a regular file is bad input naming it. */
export async function openInputFile(file: string, label: InputLabel): Promise<{ handle: FileHandle; size: number }> {
  let handle: FileHandle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw cannotOpen(file, label, error);
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) {
      throw new GatekeptError('NOT_A_REGULAR_FILE', `${label.what} ${label.shownAs ?? file} is ${kindOf(stats)}: it must be a regular file`, {
        suggestion: label.suggestion ?? 'give a regular file: not a directory, device or FIFO',
      });
    }
    return { handle, size: stats.size };
  } catch (error) {
    await handle.close();
    if (error instanceof GatekeptError) throw error;
    throw cannotOpen(file, label, error);
  }
}

function tooLarge(file: string, label: InputLabel, where: string, cap: number): GatekeptError {
  return new GatekeptError('INPUT_TOO_LARGE', `${label.what} ${label.shownAs ?? file}: ${where} is longer than ${formatBytes(cap)}, the most gatekept reads`, {
    ...(label.suggestion ? { suggestion: label.suggestion } : {}),
  });
}

/** A regular file read whole, at most `cap` bytes of it. */
export async function readInputFile(file: string, label: InputLabel, cap = MAX_FILE_BYTES): Promise<Buffer> {
  const { handle, size } = await openInputFile(file, label);
  try {
    if (size > cap) throw tooLarge(file, label, 'the file', cap);
    // Read to the end rather than trusting the size: the file may grow meanwhile.
    const parts: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buffer = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, cap + 1 - total));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      parts.push(buffer.subarray(0, bytesRead));
      total += bytesRead;
      if (total > cap) throw tooLarge(file, label, 'the file', cap);
    }
    return Buffer.concat(parts, total);
  } catch (error) {
    if (error instanceof GatekeptError) throw error;
    throw cannotOpen(file, label, error);
  } finally {
    await handle.close();
  }
}

/** One line of an input file, without its line break (`\n` or `\r\n`). */
export interface InputLine {
  /** 1-based. */
  line: number;
  bytes: Buffer;
}

export interface InputLines {
  /** The file's size when opened, for progress. */
  size: number;
  lines: AsyncGenerator<InputLine>;
  /** Closes the file; reading every line closes it too. */
  close: () => Promise<void>;
}

/**
 * The lines of a regular file, read a chunk at a time: a line is held whole
 * (up to `cap` bytes, else bad input naming its number), never the file.
 * A UTF-8 byte order mark at the start is dropped.
 */
export async function readInputLines(file: string, label: InputLabel, cap = MAX_LINE_BYTES): Promise<InputLines> {
  const { handle, size } = await openInputFile(file, label);
  let closing: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closing ??= handle.close().catch(() => undefined);
    return closing;
  };
  async function* lines(): AsyncGenerator<InputLine> {
    try {
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      let number = 1;
      const finish = (tail: Buffer): InputLine => {
        let bytes = pending.length === 0 ? tail : Buffer.concat([...pending, tail], pendingBytes + tail.length);
        pending = [];
        pendingBytes = 0;
        if (bytes.length > 0 && bytes[bytes.length - 1] === 0x0d) bytes = bytes.subarray(0, bytes.length - 1);
        if (bytes.length > cap) throw tooLarge(file, label, `line ${number}`, cap);
        if (number === 1 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) bytes = bytes.subarray(3);
        return { line: number++, bytes };
      };
      for (;;) {
        const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
        let bytesRead: number;
        try {
          ({ bytesRead } = await handle.read(chunk, 0, CHUNK_BYTES, null));
        } catch (error) {
          throw cannotOpen(file, label, error);
        }
        if (bytesRead === 0) break;
        let start = 0;
        for (;;) {
          const end = chunk.indexOf(0x0a, start);
          if (end < 0 || end >= bytesRead) {
            pending.push(Buffer.from(chunk.subarray(start, bytesRead)));
            pendingBytes += bytesRead - start;
            // Stopped as soon as the line is surely too long (one more byte may be the \r of a \r\n), not at its end.
            if (pendingBytes > cap + 1) throw tooLarge(file, label, `line ${number}`, cap);
            break;
          }
          yield finish(chunk.subarray(start, end));
          start = end + 1;
        }
      }
      if (pendingBytes > 0) yield finish(Buffer.alloc(0));
    } finally {
      await close();
    }
  }
  return { size, lines: lines(), close };
}
