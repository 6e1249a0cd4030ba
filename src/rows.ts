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

/** Every non-blank line of a JSONL file, parsed; blank lines are skipped. */
export async function readJsonlValues(file: string, source: JsonlSource): Promise<JsonlLine<unknown>[]> {
  const shown = source.shownAs ?? file;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new GatekeptError(
      'FILE_NOT_FOUND',
      `cannot read ${source.what} ${shown}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      { suggestion: source.suggestion },
    );
  }
  const lines: JsonlLine<unknown>[] = [];
  text.split(/\r?\n/).forEach((raw, index) => {
    if (raw.trim() === '') return;
    try {
      lines.push({ line: index + 1, value: JSON.parse(raw) });
    } catch (error) {
      throw new GatekeptError(
        'BAD_DATASET',
        `${source.what} ${shown}: line ${index + 1} is not valid JSON (${(error as Error).message})`,
        { suggestion: source.lineSuggestion ?? 'write one JSON object per line (JSONL)' },
      );
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
