/**
 * Text normalisation and n-gram overlap shared by the duplicate and
 * contamination checks: case, Unicode compatibility forms, punctuation and
 * spacing are ignored, so "What is 17 + 25?" and "what is 17+25 ?" match.
 */

export function normalizeText(text: string): string {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

/** Character n-grams of normalised text; short texts yield themselves. */
export function charGrams(normalized: string, n = 8): Set<string> {
  const grams = new Set<string>();
  if (normalized.length <= n) {
    if (normalized) grams.add(normalized);
    return grams;
  }
  for (let i = 0; i + n <= normalized.length; i++) grams.add(normalized.slice(i, i + n));
  return grams;
}

/**
 * A gram is boilerplate when at least this share of the prompts has it...
 * A template's wording recurs in every prompt of the template, whatever the
 * template's share of the dataset: four templates of a quarter of the rows
 * each are four templates, not no template. What a question is about (its
 * numbers, names, quantities) recurs in a few prompts at most. So the bar is
 * low: a template of one prompt in fifty is still left out.
 */
const BOILERPLATE_SHARE = 0.02;
/** ...and at least this many: in a handful of rows, two alike are no template. */
const BOILERPLATE_MIN_ROWS = 3;

/**
 * The grams a dataset's prompts share: the wording of each of its templates
 * ("what is the capital of", "which river flows through", an instruction
 * every row repeats). Two texts that match only on these are two rows of one
 * template, not one question twice.
 */
export function boilerplateGrams(gramSets: readonly ReadonlySet<string>[]): Set<string> {
  const rows = new Map<string, number>();
  for (const grams of gramSets) for (const gram of grams) rows.set(gram, (rows.get(gram) ?? 0) + 1);
  const needed = Math.max(BOILERPLATE_MIN_ROWS, BOILERPLATE_SHARE * gramSets.length);
  return new Set([...rows].filter(([, count]) => count >= needed).map(([gram]) => gram));
}

/** A text's grams without the template's; all of them when the text is nothing but template. */
export function withoutBoilerplate(grams: ReadonlySet<string>, boilerplate: ReadonlySet<string>): ReadonlySet<string> {
  if (boilerplate.size === 0) return grams;
  const content = new Set([...grams].filter((gram) => !boilerplate.has(gram)));
  return content.size > 0 ? content : grams;
}

/** Share of `a`'s grams found in `b` (containment), 0..1. */
export function containment(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0) return 0;
  let shared = 0;
  for (const gram of a) if (b.has(gram)) shared++;
  return shared / a.size;
}

/**
 * For each query text, the indexed texts sharing at least `threshold` of the
 * query's grams (and vice versa, the smaller side decides), found through an
 * inverted index so large files stay fast.
 */
export class GramIndex {
  private readonly postings = new Map<string, number[]>();
  readonly sizes: number[] = [];

  add(grams: ReadonlySet<string>): number {
    const id = this.sizes.length;
    this.sizes.push(grams.size);
    for (const gram of grams) {
      const list = this.postings.get(gram);
      if (list) list.push(id);
      else this.postings.set(gram, [id]);
    }
    return id;
  }

  /** Indexed ids whose overlap with `grams` (shared / smaller size) is at least `threshold`. */
  matches(grams: ReadonlySet<string>, threshold: number, exclude?: (id: number) => boolean): { id: number; overlap: number }[] {
    const counts = new Map<number, number>();
    for (const gram of grams) {
      for (const id of this.postings.get(gram) ?? []) counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    const out: { id: number; overlap: number }[] = [];
    for (const [id, shared] of counts) {
      if (exclude?.(id)) continue;
      const overlap = shared / Math.max(1, Math.min(grams.size, this.sizes[id]!));
      if (overlap >= threshold) out.push({ id, overlap: Math.round(overlap * 1000) / 1000 });
    }
    return out.sort((a, b) => b.overlap - a.overlap || a.id - b.id);
  }
}
