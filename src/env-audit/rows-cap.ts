import * as z from 'zod';

/**
 * Where the environment loader stopped reading rows. A taskset may generate
 * tasks without end and a dataset may hold millions of rows, so the loader
 * reads at most its cap (100,000 rows); when it stops there, every count the
 * audit reports is over the rows read, and the record and the scorecard say so.
 */

export const rowsCapSchema = z.object({
  /** The rows read: the first `limit` of the taskset or dataset. */
  limit: z.number().int().min(1),
  /** What was read from: a verifiers 0.4 taskset or a classic environment's dataset. */
  source: z.enum(['taskset', 'dataset']),
  /** Its size, where it tells it without being read (a classic `datasets.Dataset`); else null. */
  total: z.number().int().nullable(),
  /** It declares that it never ends (a 0.4 Taskset with INFINITE = True). */
  unbounded: z.boolean(),
});

export type RowsCap = z.infer<typeof rowsCapSchema>;

function count(value: number): string {
  return value.toLocaleString('en-US');
}

/** The cap in words: "read the first 100,000 rows; the taskset has more (or is unbounded)". */
export function capSentence(cap: RowsCap): string {
  if (cap.total !== null) return `read the first ${count(cap.limit)} of the ${cap.source}'s ${count(cap.total)} rows`;
  if (cap.unbounded) return `read the first ${count(cap.limit)} rows; the ${cap.source} is unbounded (it generates rows without end)`;
  return `read the first ${count(cap.limit)} rows; the ${cap.source} has more (or is unbounded)`;
}

/** The record's `env.rows_cap`: the cap and the sentence that says it. */
export function capRecord(cap: RowsCap | null): (RowsCap & { note: string }) | null {
  return cap === null ? null : { ...cap, note: `${capSentence(cap)}; the checks cover those rows` };
}
