import { detectAnswerType, isNumeric } from '../../audit/answer-values.js';
import type { AnswerType } from '../../types.js';
import { boilerplateGrams, charGrams, GramIndex, normalizeText, withoutBoilerplate } from '../text-grams.js';
import { clampScore, statusFor, type CheckResult } from '../record.js';

/**
 * Dataset health: duplicate and near-duplicate prompts, answers that do not
 * parse as the inferred type, label skew for multiple choice and booleans,
 * and prompts that already state their answer. A pure function of the rows.
 * `pack` checks the data it builds with its own rules (src/pack/check-dataset.ts).
 */

export interface HealthRow {
  prompt: string | null;
  answer: string | null;
}

/** Prompts sharing this much of their character 8-grams are near-duplicates. */
const NEAR_DUPLICATE = 0.9;
/** A share of duplicates or leaks at or above this fails the check. */
const FAIL_SHARE = 0.1;
/** Above this many rows the pairwise near-duplicate search is skipped. */
const NEAR_DUPLICATE_MAX_ROWS = 20_000;
const MAX_EXAMPLES = 10;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The prompt states the answer outright: "the answer is X", "Answer: X", "\boxed{X}", or "= X" at its end. */
export function promptLeaksAnswer(prompt: string, answer: string): boolean {
  const value = answer.trim();
  if (!value) return false;
  const v = escapeRegExp(value);
  const edge = '(?![\\p{L}\\p{N}])';
  const patterns = [
    new RegExp(`answer\\s*(?:is|:|=)\\s*\\(?${v}${edge}`, 'iu'),
    new RegExp(`\\\\boxed\\{\\s*${v}\\s*\\}`, 'u'),
    new RegExp(`=\\s*${v}\\s*[.?!]?\\s*$`, 'u'),
  ];
  if (patterns.some((pattern) => pattern.test(prompt))) return true;
  // A long non-numeric answer quoted verbatim gives itself away too.
  return !isNumeric(value) && [...value].length >= 12 && prompt.toLowerCase().includes(value.toLowerCase());
}

/**
 * Rows grouped by `key`, each group in row order and the groups in the order
 * of their first row; rows whose key is null belong to no group. A group of
 * two or more is a duplicate: the rule `pack` and `audit --env` share, each
 * with its own key.
 */
export function groupRows<T>(rows: readonly T[], key: (row: T) => string | null): number[][] {
  const groups = new Map<string, number[]>();
  rows.forEach((row, index) => {
    const value = key(row);
    if (value === null) return;
    const group = groups.get(value);
    if (group) group.push(index);
    else groups.set(value, [index]);
  });
  return [...groups.values()];
}

function inferAnswerType(answers: readonly string[]): AnswerType {
  const counts = new Map<AnswerType, number>();
  for (const answer of answers) {
    const type = detectAnswerType(answer, undefined);
    counts.set(type, (counts.get(type) ?? 0) + 1);
  }
  let best: AnswerType = 'string';
  let bestCount = -1;
  for (const [type, count] of counts) if (count > bestCount) [best, bestCount] = [type, count];
  // Mostly one type with a few outliers: the outliers are what "does not parse" reports.
  return bestCount >= answers.length * 0.8 ? best : 'string';
}

export function checkDatasetHealth(rows: readonly HealthRow[], answerType: AnswerType | 'auto' = 'auto'): CheckResult {
  const total = rows.length;
  const answers = rows.map((row) => (row.answer ?? '').trim());
  const present = answers.filter((answer) => answer !== '');
  const type = answerType === 'auto' ? inferAnswerType(present) : answerType;

  // Exact duplicates: the same prompt text (rows after the first count).
  const exact = groupRows(rows, (row) => (row.prompt ?? '').trim() || null)
    .flatMap(([first, ...others]) => others.map((row) => ({ row, first: first!, prompt: (rows[row]!.prompt ?? '').trim() })))
    .sort((a, b) => a.row - b.row);
  const normalized = rows.map((row) => normalizeText(row.prompt ?? ''));
  const exactRows = new Set(exact.map((pair) => pair.row));

  // Near duplicates: different text, (almost) the same normalised content.
  const near: { row: number; other: number; overlap: number }[] = [];
  let nearSkipped = false;
  if (total <= NEAR_DUPLICATE_MAX_ROWS) {
    const index = new GramIndex();
    const allGrams = normalized.map((text) => charGrams(text));
    // Rows of one template differ only in what fills it: the template is no evidence of a duplicate.
    const template = boilerplateGrams(allGrams.filter((grams) => grams.size > 0));
    normalized.forEach((_text, row) => {
      const grams = withoutBoilerplate(allGrams[row]!, template);
      if (!exactRows.has(row) && grams.size > 0) {
        const match = index.matches(
          grams,
          NEAR_DUPLICATE,
          (id) => normalized[id] === '' || (rows[id]!.prompt ?? '').trim() === (rows[row]!.prompt ?? '').trim(),
        )[0];
        if (match) near.push({ row, other: match.id, overlap: match.overlap });
      }
      index.add(exactRows.has(row) ? new Set() : grams);
    });
  } else {
    nearSkipped = true;
  }

  const empty = answers
    .map((answer, row) => ({ answer, row }))
    .filter((entry) => entry.answer === '')
    .map((entry) => entry.row);
  const unparseable = answers
    .map((answer, row) => ({ answer, row }))
    .filter(
      ({ answer }) =>
        answer !== '' && ((type === 'numeric' && !isNumeric(answer)) || (type === 'boolean' && detectAnswerType(answer, undefined) !== 'boolean')),
    );
  const leaks = rows
    .map((row, index) => ({ row: index, prompt: row.prompt ?? '', answer: answers[index]! }))
    .filter((entry) => entry.answer !== '' && promptLeaksAnswer(entry.prompt, entry.answer));

  let skew: { label: string; share: number; labels: number } | null = null;
  if ((type === 'choice' || type === 'boolean') && present.length > 0) {
    const counts = new Map<string, number>();
    for (const answer of present) counts.set(answer.toLowerCase(), (counts.get(answer.toLowerCase()) ?? 0) + 1);
    const [label, count] = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]!;
    const labels = type === 'boolean' ? 2 : Math.max(counts.size, 2);
    const share = count / present.length;
    // A label at twice its fair share (or 80% of a boolean set) teaches the model to guess it.
    if (share >= Math.min(0.8, 2 / labels)) skew = { label, share: Math.round(share * 1000) / 1000, labels };
  }

  const share = (count: number) => (total === 0 ? 0 : count / total);
  const problems: string[] = [];
  const failures: string[] = [];
  if (empty.length > 0) failures.push(`${empty.length} empty answer${empty.length === 1 ? '' : 's'}`);
  if (exact.length > 0) (share(exact.length) >= FAIL_SHARE ? failures : problems).push(`${exact.length} duplicate prompt${exact.length === 1 ? '' : 's'}`);
  if (near.length > 0) problems.push(`${near.length} near-duplicate prompt${near.length === 1 ? '' : 's'}`);
  if (unparseable.length > 0) problems.push(`${unparseable.length} answer${unparseable.length === 1 ? '' : 's'} not ${type}`);
  if (skew) problems.push(`label ${JSON.stringify(skew.label)} is ${Math.round(skew.share * 100)}% of answers`);
  if (leaks.length > 0)
    (share(leaks.length) >= FAIL_SHARE ? failures : problems).push(
      `${leaks.length} prompt${leaks.length === 1 ? '' : 's'} state${leaks.length === 1 ? 's' : ''} the answer`,
    );
  if (total === 0) failures.push('no rows');

  const score = clampScore(10 - 3 * failures.length - 1.5 * problems.length);
  const status = statusFor(score, failures.length > 0);
  const listed = [...failures, ...problems];
  return {
    name: 'dataset_health',
    status,
    score,
    justification:
      listed.length === 0 ? `${total} rows: no duplicates, every answer parses as ${type}, no skew, no leaked answers` : `${total} rows: ${listed.join('; ')}`,
    evidence: {
      rows: total,
      answer_type: type,
      empty_answers: empty.slice(0, MAX_EXAMPLES),
      empty_answers_total: empty.length,
      duplicates: exact.slice(0, MAX_EXAMPLES),
      duplicates_total: exact.length,
      near_duplicates: near.slice(0, MAX_EXAMPLES).map((pair) => ({ ...pair, prompt: rows[pair.row]!.prompt, other_prompt: rows[pair.other]!.prompt })),
      near_duplicates_total: near.length,
      near_duplicates_skipped: nearSkipped,
      unparseable: unparseable.slice(0, MAX_EXAMPLES),
      unparseable_total: unparseable.length,
      label_skew: skew,
      answer_in_prompt: leaks.slice(0, MAX_EXAMPLES),
      answer_in_prompt_total: leaks.length,
    },
  };
}
