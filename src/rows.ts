import type { z } from 'zod';
import { GatekeptError } from './errors.js';
import { readInputLines } from './read-input.js';

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

/**
 * Every non-blank line of a JSONL file, parsed; blank lines are skipped. The
 * file must be a regular file and no line longer than MAX_LINE_BYTES (see
 * read-input.ts).
 */
export async function readJsonlValues(file: string, source: JsonlSource): Promise<JsonlLine<unknown>[]> {
  const shown = source.shownAs ?? file;
  // A byte that is not UTF-8 is refused, naming its line: decoding it to U+FFFD would audit a gold nobody wrote.
  const { lines: input } = await readInputLines(file, { what: source.what, shownAs: shown, suggestion: source.suggestion });
  const lines: JsonlLine<unknown>[] = [];
  for await (const { line, text: raw } of input) {
    if (raw.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (error) {
      throw new GatekeptError('BAD_DATASET', `${source.what} ${shown}: line ${line} is not valid JSON (${(error as Error).message})`, {
        suggestion: source.lineSuggestion ?? 'write one JSON object per line (JSONL)',
      });
    }
    if (nesting(value, MAX_NESTING) > MAX_NESTING) {
      throw new GatekeptError('BAD_DATASET', `${source.what} ${shown}: line ${line} nests arrays and objects more than ${MAX_NESTING} deep`, {
        suggestion: 'flatten the row: a verifier reads it with a JSON parser that stops at its recursion limit',
      });
    }
    lines.push({ line, value });
  }
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
