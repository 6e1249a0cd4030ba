import { groupRows } from '../env-audit/checks/dataset-health.js';
import type { TaskRow } from './build-dataset.js';
import type { DatasetHealth } from './pack-record.js';

/**
 * Dataset health: problems in the data that make an environment teach the
 * wrong thing even with a sound verifier. This is `pack`'s check, recorded in
 * gatekept_audit.json (`dataset_health`); `audit --env` has its own, with a
 * scored result, in src/env-audit/checks/dataset-health.ts. Both group
 * duplicates with groupRows; the rules differ because pack warns about the
 * seed it builds from, while audit --env scores a dataset built elsewhere.
 */

/** Pure: duplicates and label skew. `unrewarded` comes from running the verifier. */
export function checkDatasetHealth(rows: readonly TaskRow[], isChoice: boolean, unrewarded: readonly number[]): DatasetHealth {
  const duplicates = groupRows(rows, (row) => row.question.trim().replace(/\s+/g, ' ').toLowerCase())
    .filter((indices) => indices.length > 1)
    .map((indices) => ({ question: rows[indices[0]!]!.question.slice(0, 120), rows: indices }));
  const warnings: string[] = [];
  if (duplicates.length > 0) {
    const extra = duplicates.reduce((sum, group) => sum + group.rows.length - 1, 0);
    warnings.push(`${extra} duplicate question(s) in ${duplicates.length} group(s): duplicates overweight those items in training`);
  }
  let labelCounts: Record<string, number> | null = null;
  if (isChoice) {
    labelCounts = {};
    for (const row of rows) labelCounts[row.answer.trim()] = (labelCounts[row.answer.trim()] ?? 0) + 1;
    for (const [label, count] of Object.entries(labelCounts)) {
      if (count / rows.length > 0.5) {
        warnings.push(
          `label skew: ${label} is the answer in ${count} of ${rows.length} rows; always answering ${label} would score ${((100 * count) / rows.length).toFixed(0)}%`,
        );
      }
    }
  }
  return { rows: rows.length, duplicate_questions: duplicates, label_counts: labelCounts, unrewarded_gold_rows: [...unrewarded], warnings };
}
