/** How long completions travel to a worker: as the difference from one sent before (see LongTextCodec). */

/** A completion at least this long is remembered by both ends of a worker's pipe. */
const LONG_TEXT = 1024;
/** How many long completions each end remembers (the most recent ones): a few rows' worth. */
const LONG_TEXTS_KEPT = 256;
/** Characters compared first, to find a remembered completion that shares a start, an end or a middle. */
const LONG_PROBE = 64;
/** Offsets count UTF-16 units here and code points in Python: equal only without surrogates. */
const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * How a completion travels: as is; ['k', text], to be remembered as the next
 * long text; [number, kept start, middle, kept end], the remembered long text
 * of that number with its middle replaced; or [number, head, from, to, tail],
 * head + that text's characters from..to + tail (both remembered in turn).
 */
type EncodedText = string | ['k', string] | [number, number, string, number] | [number, string, number, number, string];

/** How far around a long text's middle its anchor is looked for: more than a padding's period. */
const ANCHOR_WINDOW = 512;
/** Characters hashed at each position considered for the anchor. */
const ANCHOR_GRAM = 16;
const HASH_FACTOR = 0x9e3779b1;
/** HASH_FACTOR ** (ANCHOR_GRAM - 1), in 32-bit arithmetic: takes a character out of the rolling hash. */
const HASH_DROP = Array.from({ length: ANCHOR_GRAM - 1 }).reduce<number>((power) => Math.imul(power, HASH_FACTOR), 1);

/**
 * Where a long text's middle probe starts: the position near its middle
 * whose following ANCHOR_GRAM characters hash highest (the first such). It
 * depends on the characters alone, so in two texts whose paddings are
 * shifted by a few characters (a longer gold before them) it falls on the
 * same place in the padding, which a fixed offset would not. The hash rolls:
 * one multiplication per position.
 */
function anchorAt(text: string): number {
  const from = Math.max(0, (text.length - ANCHOR_WINDOW) >>> 1);
  const to = Math.min(text.length - LONG_PROBE, from + ANCHOR_WINDOW);
  let hash = 0;
  for (let index = from; index < from + ANCHOR_GRAM; index += 1) hash = (Math.imul(hash, HASH_FACTOR) + text.charCodeAt(index)) | 0;
  let best = from;
  let top = hash >>> 0;
  for (let index = from + 1; index < to; index += 1) {
    const gone = Math.imul(text.charCodeAt(index - 1), HASH_DROP);
    hash = (Math.imul(hash - gone, HASH_FACTOR) + text.charCodeAt(index + ANCHOR_GRAM - 1)) | 0;
    if (hash >>> 0 > top) {
      top = hash >>> 0;
      best = index;
    }
  }
  return best;
}

/** Texts within a few hundred characters of each other share a class or are in adjacent ones. */
function sizeClass(length: number): number {
  return length >>> 9;
}

/**
 * Long attack completions differ little from row to row (50,000 characters
 * of padding and then the row's gold), and encoding, piping and decoding them
 * is most of what a fast verifier's audit costs. Both ends of a worker's pipe
 * number the long completions in the order they were sent and remember the
 * last LONG_TEXTS_KEPT, so a long completion that shares its start and end,
 * or its middle, with one of them goes as the difference, and the worker
 * rebuilds it (python/gatekept_calls.py, _completion_text). The middle matters when
 * a row's gold sits at both ends of a padding: neither end matches the row
 * before, the padding between them does. One instance per worker process: a
 * new worker starts with nothing remembered.
 */
export class LongTextCodec {
  private readonly kept = new Map<number, string>();
  private next = 0;
  /** The latest remembered text with this start, this end, and this middle. */
  private readonly byHead = new Map<string, number>();
  private readonly byTail = new Map<string, number>();
  private readonly byMiddle = new Map<string, number>();
  /** Where each remembered text's middle probe starts. */
  private readonly anchors = new Map<number, number>();

  encode(text: string): EncodedText {
    if (text.length < LONG_TEXT || SURROGATE.test(text)) return text;
    const head = text.slice(0, LONG_PROBE);
    const tail = text.slice(-LONG_PROBE);
    const at = anchorAt(text);
    const middle = text.slice(at, at + LONG_PROBE);
    let best: EncodedText | null = null;
    let saved = LONG_TEXT / 2;
    // A padding repeats, so texts of other lengths share the middle: the
    // remembered ones of about this length are the ones worth comparing.
    const size = sizeClass(text.length);
    const candidates = new Set([this.byHead.get(head), this.byTail.get(tail)]);
    for (const near of [size - 1, size, size + 1]) candidates.add(this.byMiddle.get(`${near}:${middle}`));
    for (const number of candidates) {
      const base = number === undefined ? undefined : this.kept.get(number);
      if (base === undefined) continue;
      const limit = Math.min(base.length, text.length);
      const prefix = commonLength(base, text, limit, false);
      const suffix = commonLength(base, text, limit - prefix, true);
      if (prefix + suffix > saved) {
        saved = prefix + suffix;
        best = [number!, prefix, text.slice(prefix, text.length - suffix), suffix];
      }
      // The run of characters the two share around their anchors.
      const baseAt = this.anchors.get(number!)!;
      if (base.slice(baseAt, baseAt + LONG_PROBE) !== middle) continue;
      const before = commonLength(base.slice(0, baseAt), text.slice(0, at), Math.min(baseAt, at), true);
      const after = commonLength(base.slice(baseAt), text.slice(at), Math.min(base.length - baseAt, text.length - at), false);
      if (before + after > saved) {
        saved = before + after;
        best = [number!, text.slice(0, at - before), baseAt - before, baseAt + after, text.slice(at + after)];
      }
    }
    this.remember(text, head, tail, at);
    return best ?? ['k', text];
  }

  /** The worker's side, mirrored for tests: the completion rebuilt from what was sent. */
  decode(encoded: EncodedText): string {
    if (typeof encoded === 'string') return encoded;
    let text: string;
    if (encoded[0] === 'k') {
      text = encoded[1];
    } else if (encoded.length === 4) {
      const [number, prefix, middle, suffix] = encoded;
      const base = this.kept.get(number)!;
      text = base.slice(0, prefix) + middle + base.slice(base.length - suffix);
    } else {
      const [number, head, from, to, tail] = encoded;
      text = head + this.kept.get(number)!.slice(from, to) + tail;
    }
    this.remember(text, text.slice(0, LONG_PROBE), text.slice(-LONG_PROBE), anchorAt(text));
    return text;
  }

  private remember(text: string, head: string, tail: string, at: number): void {
    const number = this.next;
    this.next += 1;
    this.kept.set(number, text);
    this.anchors.set(number, at);
    this.byHead.set(head, number);
    this.byTail.set(tail, number);
    this.byMiddle.set(`${sizeClass(text.length)}:${text.slice(at, at + LONG_PROBE)}`, number);
    const gone = number - LONG_TEXTS_KEPT;
    const old = this.kept.get(gone);
    if (old === undefined) return;
    const oldAt = this.anchors.get(gone)!;
    this.kept.delete(gone);
    this.anchors.delete(gone);
    const oldHead = old.slice(0, LONG_PROBE);
    const oldTail = old.slice(-LONG_PROBE);
    const oldMiddle = `${sizeClass(old.length)}:${old.slice(oldAt, oldAt + LONG_PROBE)}`;
    if (this.byHead.get(oldHead) === gone) this.byHead.delete(oldHead);
    if (this.byTail.get(oldTail) === gone) this.byTail.delete(oldTail);
    if (this.byMiddle.get(oldMiddle) === gone) this.byMiddle.delete(oldMiddle);
  }
}

/**
 * How many characters `a` and `b` share at their start (or their end), up to
 * `limit`. Found by halving, each step one native comparison of two slices:
 * a character loop over 50,000 characters of padding costs more than the
 * verifier call it feeds.
 */
export function commonLength(a: string, b: string, limit: number, fromEnd: boolean): number {
  let same = 0;
  let high = limit;
  while (same < high) {
    const mid = (same + high + 1) >>> 1;
    const equal = fromEnd ? a.slice(a.length - mid, a.length - same) === b.slice(b.length - mid, b.length - same) : a.slice(same, mid) === b.slice(same, mid);
    if (equal) same = mid;
    else high = mid - 1;
  }
  return same;
}
