import type { AgainstRow } from '../input-files.js';
import { boilerplateGrams, charGrams, GramIndex, normalizeText, withoutBoilerplate } from '../text-grams.js';
import { clampScore, notApplicable, statusFor, type CheckResult } from '../record.js';
import { capSentence, type RowsCap } from '../rows-cap.js';

/**
 * Contamination: the environment's prompts against local question files.
 * Exact matches (after normalisation) and near matches (shared character
 * 8-grams over the shorter text, the wording of the prompts' templates left
 * out)
 * are listed as pairs. A pure function.
 */

const NEAR_MATCH = 0.6;
/** A share of contaminated prompts at or above this fails the check. */
const FAIL_SHARE = 0.05;
const MAX_PAIRS = 20;

/**
 * `prompts`: the text of each prompt (a prompt of an image alone has none
 * and is not checked); `cap`: where the loader stopped reading, if it did.
 */
export function checkContamination(
  prompts: readonly (string | null)[],
  against: readonly AgainstRow[] | null,
  files: readonly string[] = [],
  cap: RowsCap | null = null,
): CheckResult {
  if (against === null) return notApplicable('contamination', 'not checked: no --against file given');
  const index = new GramIndex();
  const normalizedPrompts = prompts.map((prompt) => normalizeText(prompt ?? ''));
  const promptGrams = normalizedPrompts.map((text) => charGrams(text));
  // A templated dataset shares its template with a templated eval set: only the rest is evidence.
  const template = boilerplateGrams(promptGrams.filter((grams) => grams.size > 0));
  const normalizedAgainst = against.map((row) => normalizeText(row.text));
  for (const text of normalizedAgainst) index.add(withoutBoilerplate(charGrams(text), template));
  const pairs: { row: number; kind: 'exact' | 'near'; overlap: number; prompt: string; file: string; line: number; match: string }[] = [];
  let exact = 0;
  let near = 0;
  prompts.forEach((prompt, row) => {
    const text = normalizedPrompts[row]!;
    if (!text) return;
    const best = index.matches(withoutBoilerplate(promptGrams[row]!, template), NEAR_MATCH)[0];
    if (!best) return;
    const match = against[best.id]!;
    const kind = normalizedAgainst[best.id] === text ? 'exact' : 'near';
    if (kind === 'exact') exact++;
    else near++;
    pairs.push({ row, kind, overlap: kind === 'exact' ? 1 : best.overlap, prompt: prompt ?? '', file: match.file, line: match.line, match: match.text });
  });
  pairs.sort((a, b) => (a.kind === b.kind ? b.overlap - a.overlap || a.row - b.row : a.kind === 'exact' ? -1 : 1));
  const checked = prompts.filter((prompt) => normalizeText(prompt ?? '') !== '').length;
  const share = checked === 0 ? 0 : (exact + near) / checked;
  const failed = exact > 0 || share >= FAIL_SHARE;
  const score = clampScore(10 * (1 - share) - (exact > 0 ? 3 : 0));
  const covered = cap === null ? '' : ` (${capSentence(cap)}; these are its prompts)`;
  return {
    name: 'contamination',
    status: statusFor(score, failed),
    score,
    justification:
      (exact + near === 0
        ? `no matches between ${checked} prompts and ${against.length} questions in ${files.length} file${files.length === 1 ? '' : 's'}`
        : `${exact} exact and ${near} near match${near === 1 ? '' : 'es'} among ${checked} prompts (${(share * 100).toFixed(1)}%) against ${against.length} questions`) +
      covered,
    evidence: {
      rows_cap: cap,
      files: [...files],
      prompts_checked: checked,
      questions: against.length,
      exact,
      near,
      near_threshold: NEAR_MATCH,
      method: 'normalized character 8-gram overlap over the shorter text, leaving out the grams at least 3 prompts and 2% of them share (their templates)',
      pairs: pairs.slice(0, MAX_PAIRS),
      pairs_total: pairs.length,
    },
  };
}
