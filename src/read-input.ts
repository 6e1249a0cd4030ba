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
  text: string;
}

export interface InputLines {
  /** The file's size when opened, for progress. */
  size: number;
  lines: AsyncGenerator<InputLine>;
  /** Closes the file; reading every line closes it too. */
  close: () => Promise<void>;
}

export interface LineOptions {
  /** The longest line, in bytes (default MAX_LINE_BYTES). */
  cap?: number;
  /** A byte that is not UTF-8 is bad input naming its line (default), or is read as U+FFFD. */
  invalidUtf8?: 'refuse' | 'replace';
}

/**
 * The lines of a regular file, read a chunk at a time: a line is held whole
 * (up to the cap, else bad input naming its number), never the file. The
 * complete lines of a chunk are decoded at once, which costs about what a
 * text stream does. A UTF-8 byte order mark at the start is dropped.
 */
export async function readInputLines(file: string, label: InputLabel, options: LineOptions = {}): Promise<InputLines> {
  const cap = options.cap ?? MAX_LINE_BYTES;
  const refuse = (options.invalidUtf8 ?? 'refuse') === 'refuse';
  const { handle, size } = await openInputFile(file, label);
  let closing: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closing ??= handle.close().catch(() => undefined);
    return closing;
  };
  // ignoreBOM: a BOM is dropped from the first line alone, below, not from every chunk.
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  /** `bytes` holds whole lines, the first of them numbered `first`. */
  const decode = (bytes: Buffer, first: number): string => {
    if (!refuse) return bytes.toString('utf8');
    try {
      return decoder.decode(bytes);
    } catch {
      throw notUtf8(file, label, first + badLine(bytes, (part) => decoder.decode(part)));
    }
  };
  let number = 1;
  /** A line as read, `bytes` long when that is known; past the cap is bad input. */
  const lineOf = (raw: string, bytes: number | null): InputLine => {
    const crlf = raw.endsWith('\r');
    let text = crlf ? raw.slice(0, -1) : raw;
    // A UTF-16 unit is 1 to 3 bytes: the exact count is needed only near the cap.
    const length = bytes !== null ? bytes - (crlf ? 1 : 0) : text.length * 3 <= cap ? 0 : Buffer.byteLength(text);
    if (length > cap) throw tooLarge(file, label, `line ${number}`, cap);
    if (number === 1 && text.startsWith('\ufeff')) text = text.slice(1);
    return { line: number++, text };
  };
  async function* lines(): AsyncGenerator<InputLine> {
    try {
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      for (;;) {
        const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
        let bytesRead: number;
        try {
          ({ bytesRead } = await handle.read(chunk, 0, CHUNK_BYTES, null));
        } catch (error) {
          throw cannotOpen(file, label, error);
        }
        if (bytesRead === 0) break;
        const last = chunk.lastIndexOf(0x0a, bytesRead - 1);
        if (last < 0) {
          pending.push(chunk.subarray(0, bytesRead));
          pendingBytes += bytesRead;
          // Stopped as soon as the line is surely too long (one more byte may be the \r of a \r\n), not at its end.
          if (pendingBytes > cap + 1) throw tooLarge(file, label, `line ${number}`, cap);
          continue;
        }
        let start = 0;
        if (pending.length > 0) {
          // The line begun in earlier chunks ends at this chunk's first newline.
          const end = chunk.indexOf(0x0a);
          const head = Buffer.concat([...pending, chunk.subarray(0, end)], pendingBytes + end);
          pending = [];
          pendingBytes = 0;
          yield lineOf(decode(head, number), head.length);
          start = end + 1;
        }
        if (start <= last) {
          // Every complete line left in the chunk, decoded at once (a newline byte never falls inside a character).
          const texts = decode(chunk.subarray(start, last), number).split('\n');
          for (const text of texts) yield lineOf(text, null);
        }
        if (last + 1 < bytesRead) {
          // Copied: a view would keep the whole chunk alive for a short tail.
          pending.push(Buffer.from(chunk.subarray(last + 1, bytesRead)));
          pendingBytes = bytesRead - last - 1;
        }
      }
      if (pending.length > 0) {
        const tail = Buffer.concat(pending, pendingBytes);
        yield lineOf(decode(tail, number), tail.length);
      }
    } finally {
      await close();
    }
  }
  return { size, lines: lines(), close };
}

function notUtf8(file: string, label: InputLabel, line: number): GatekeptError {
  // Refused rather than read as U+FFFD: that would audit a gold nobody wrote.
  return new GatekeptError('BAD_DATASET', `${label.what} ${label.shownAs ?? file}: line ${line} is not valid UTF-8`, {
    suggestion: 'save the file as UTF-8',
  });
}

/** How many lines into `bytes` (0 for its first) the first byte that is not UTF-8 is. */
function badLine(bytes: Buffer, decode: (bytes: Buffer) => string): number {
  let start = 0;
  for (let line = 0; ; line++) {
    const end = bytes.indexOf(0x0a, start);
    try {
      decode(bytes.subarray(start, end < 0 ? bytes.length : end));
    } catch {
      return line;
    }
    if (end < 0) return line;
    start = end + 1;
  }
}
