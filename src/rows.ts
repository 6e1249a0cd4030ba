import { readFile } from 'node:fs/promises';
import type { z } from 'zod';
import { GatekeptError } from './errors.js';

/**
 * The task rows every stage shares (a seed's dataset, the packages' data.jsonl,
 * what smoke replays), and the one reader of JSONL files, so that a bad line
 * gets the same message naming its file and line wherever it is read.
 */

export interface Row {
  question: string;
  answer: string;
  info?: Record<string, unknown>;
}

export interface JsonlLine<T> {
  /** 1-based line number in the file. */
  line: number;
  value: T;
}

export interface JsonlSource {
  /** What the file is, for messages: "dataset", "contamination file". */
  what: string;
  /** How to fix the file, shown with every error about it. */
  suggestion: string;
  /** How messages name the file (default: its path), e.g. relative to the seed. */
  shownAs?: string;
  /** The fix for a line that is not JSON (default: write JSONL). */
  lineSuggestion?: string;
}

/**
 * How deep a line's arrays and objects may nest. Every value reaches a
 * Python verifier, whose JSON reader stops at its recursion limit; real
 * rows nest a few levels.
 */
const MAX_NESTING = 100;

/** The deepest nesting of arrays and objects in `value`, looked at no further than `limit` + 1. */
function nesting(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== 'object') continue;
    deepest = Math.max(deepest, depth + 1);
    if (deepest > limit) return deepest;
    for (const child of Object.values(item as Record<string, unknown>)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/** Every non-blank line of a JSONL file, parsed; blank lines are skipped. */
export async function readJsonlValues(file: string, source: JsonlSource): Promise<JsonlLine<unknown>[]> {
  const shown = source.shownAs ?? file;
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    throw new GatekeptError('FILE_NOT_FOUND', `cannot read ${source.what} ${shown}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, {
      suggestion: source.suggestion,
    });
  }
  let text: string;
  try {
    // Fatal on a byte that is not UTF-8: decoding it to U+FFFD would audit a gold nobody wrote.
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    const line = bytes.subarray(0, firstInvalidUtf8(bytes)).toString('latin1').split('\n').length;
    throw new GatekeptError('BAD_DATASET', `${source.what} ${shown}: line ${line} is not valid UTF-8`, {
      suggestion: 'save the file as UTF-8',
    });
  }
  const lines: JsonlLine<unknown>[] = [];
  text.split(/\r?\n/).forEach((raw, index) => {
    if (raw.trim() === '') return;
    try {
      const value: unknown = JSON.parse(raw);
      if (nesting(value, MAX_NESTING) > MAX_NESTING) {
        throw new GatekeptError('BAD_DATASET', `${source.what} ${shown}: line ${index + 1} nests arrays and objects more than ${MAX_NESTING} deep`, {
          suggestion: 'flatten the row: a verifier reads it with a JSON parser that stops at its recursion limit',
        });
      }
      lines.push({ line: index + 1, value });
    } catch (error) {
      if (error instanceof GatekeptError) throw error;
      throw new GatekeptError('BAD_DATASET', `${source.what} ${shown}: line ${index + 1} is not valid JSON (${(error as Error).message})`, {
        suggestion: source.lineSuggestion ?? 'write one JSON object per line (JSONL)',
      });
    }
  });
  return lines;
}

/**
 * A JSONL file whose every line must match `schema`. `invalid` builds the error
 * for a line that does not (by default a BAD_DATASET error naming the line).
 */
export async function readJsonl<S extends z.ZodType>(
  file: string,
  schema: S,
  source: JsonlSource & { invalid?: (line: number, issues: z.ZodError) => GatekeptError },
): Promise<JsonlLine<z.output<S>>[]> {
  const lines = await readJsonlValues(file, source);
  return lines.map(({ line, value }) => {
    const parsed = schema.safeParse(value);
    if (parsed.success) return { line, value: parsed.data };
    throw (
      source.invalid?.(line, parsed.error) ??
      new GatekeptError('BAD_DATASET', `${source.what} ${source.shownAs ?? file}: line ${line} is invalid`, { suggestion: source.suggestion })
    );
  });
}

/** Offset of the first byte sequence that is not UTF-8 (the length when there is none). */
function firstInvalidUtf8(bytes: Buffer): number {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let low = 0;
  let high = bytes.length;
  // The longest valid prefix, by halving: decoding a prefix cut inside a
  // character fails too, so the answer is within 3 bytes of the bad one.
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    try {
      decoder.decode(bytes.subarray(0, middle));
      low = middle;
    } catch {
      high = middle - 1;
    }
  }
  return low;
}
