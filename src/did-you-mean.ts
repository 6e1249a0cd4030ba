/**
 * The nearest of a few known names to a mistyped one, for "did you mean"
 * hints. Edit distance counts a swap of two neighbouring letters as one
 * slip (optimal string alignment), since that is the commonest typo; a
 * candidate further than a third of the word's length is no suggestion,
 * unless the word is the start of it (`max_exploit_rate` for
 * `max_exploit_rate_ci_hi`), which ranks behind any closer candidate.
 */

/** Edits (insert, delete, substitute, swap neighbours) that turn `from` into `to`. */
export function editDistance(from: string, to: string): number {
  const rows = from.length + 1;
  const cols = to.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = from[i - 1] === to[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && from[i - 1] === to[j - 2] && from[i - 2] === to[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[from.length]![to.length]!;
}

/** The closest candidate within reach (the first of equals, so the order given decides ties), or undefined. */
export function nearestName(word: string, candidates: Iterable<string>): string | undefined {
  const reach = Math.max(1, Math.floor(word.length / 3));
  let best: string | undefined;
  let bestRank = Number.POSITIVE_INFINITY;
  for (const candidate of candidates) {
    if (candidate === word) continue;
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase());
    const started = word.length >= 4 && candidate.toLowerCase().startsWith(word.toLowerCase());
    const rank = distance <= reach ? distance : started ? reach + 1 : Number.POSITIVE_INFINITY;
    if (rank < bestRank) {
      best = candidate;
      bestRank = rank;
    }
  }
  return best;
}
