/**
 * How a completion is shown to a person, in the terminal, Markdown and HTML
 * alike. Attacks hide in characters a reader cannot see (`1\u200b042` looks
 * like `1042`), so every invisible, control or unusual-space character is
 * shown as an escape, while ordinary text (backslashes included) stays as
 * written: `\boxed{42}`, not the JSON-escaped `\\boxed{42}`.
 */

/** A run of text: `escaped` runs stand for characters that were not printable as they are. */
export interface TextPiece {
  text: string;
  escaped: boolean;
}

/**
 * Characters shown escaped: C0/C1 controls and DEL, format characters
 * (zero-width, joiners, bidi controls, soft hyphen, BOM), every space other
 * than the plain one, line and paragraph separators, variation selectors,
 * and lone surrogates.
 */
const HIDDEN_CLASS = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u115f\u1160\u3164\uffa0\p{Cs}]/u;

function isHidden(char: string): boolean {
  const code = char.codePointAt(0)!;
  // Variation selectors change how the character before them looks, and show nothing themselves.
  return HIDDEN_CLASS.test(char) || (code >= 0xfe00 && code <= 0xfe0f) || (code >= 0xe0100 && code <= 0xe01ef);
}

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\t': '\\t', '\r': '\\r' };

function escapeChar(char: string): string {
  const named = NAMED[char];
  if (named) return named;
  const code = char.codePointAt(0)!;
  if (code <= 0xff) return `\\x${code.toString(16).padStart(2, '0')}`;
  if (code <= 0xffff) return `\\u${code.toString(16).padStart(4, '0')}`;
  return `\\u{${code.toString(16)}}`;
}

/**
 * Split text into printable runs and escapes. With `keepNewlines`, a line
 * break is kept as a real one (block display), except a final one.
 */
export function pieces(text: string, keepNewlines = false): TextPiece[] {
  const out: TextPiece[] = [];
  const push = (value: string, escaped: boolean) => {
    const last = out[out.length - 1];
    if (last && last.escaped === escaped) last.text += value;
    else out.push({ text: value, escaped });
  };
  // Iterating by code point keeps astral characters whole; lone surrogates arrive on their own.
  const chars = [...text];
  for (const [index, char] of chars.entries()) {
    // A final line break would be invisible in a block, so it is announced like any other.
    if (keepNewlines && char === '\n' && index < chars.length - 1) {
      push('\n', false);
      continue;
    }
    if (isHidden(char)) push(escapeChar(char), true);
    else push(char, false);
  }
  return out;
}

/** Text with its hidden characters escaped, on one line. */
export function showInline(text: string): string {
  return pieces(text)
    .map((piece) => piece.text)
    .join('');
}

const ESCAPE_UNIT = /\\(?:u\{[0-9a-f]+\}|u[0-9a-f]{4}|x[0-9a-f]{2}|[ntr])/g;

/**
 * One line, cut to `max` characters (code points) with a visible marker, for
 * tables; never inside an escape. A cut text keeps its end as well as its
 * start (two thirds from the start, where an attack usually is, the rest
 * from the end, where the answer is), so a long reasoning does not hide the
 * answer it ends with.
 */
export function showShort(text: string, max = 48): string {
  const all = pieces(text).flatMap((piece) => (piece.escaped ? (piece.text.match(ESCAPE_UNIT) ?? []) : [...piece.text]));
  if (all.reduce((sum, unit) => sum + unit.length, 0) <= max) return all.join('');
  const budget = max - 1;
  const head = take(all, Math.ceil((budget * 2) / 3));
  const tail = take([...all.slice(head.length)].reverse(), budget - head.join('').length).reverse();
  return `${head.join('')}…${tail.join('')}`;
}

/** The units from the start of `units` that fit in `chars` characters. */
function take(units: readonly string[], chars: number): string[] {
  const out: string[] = [];
  let used = 0;
  for (const unit of units) {
    if (used + unit.length > chars) break;
    out.push(unit);
    used += unit.length;
  }
  return out;
}

export interface FoldOptions {
  /** Longest line shown, in characters; longer lines wrap. Leave out to let the page wrap them. */
  width?: number;
  /** Most characters shown; the middle of a longer text is left out with a note saying how much. */
  maxChars?: number;
}

/** A folded line: its pieces, and whether it continues a line that was wrapped. */
export interface FoldedLine {
  pieces: TextPiece[];
  continued: boolean;
  /** Characters left out of the middle here, shown as a note in place of this line. */
  omitted?: number;
}

const DEFAULT_MAX_CHARS = 1500;

/** One visible unit: a character, a whole escape, or a kept line break. */
interface Unit {
  text: string;
  escaped: boolean;
}

function units(text: string): Unit[] {
  const out: Unit[] = [];
  for (const piece of pieces(text, true)) {
    if (piece.escaped) {
      // Each escape is one unit: `\u200b` must never be cut in two.
      for (const unit of piece.text.match(ESCAPE_UNIT) ?? []) out.push({ text: unit, escaped: true });
    } else {
      for (const char of piece.text) out.push({ text: char, escaped: false });
    }
  }
  return out;
}

/**
 * Fold a completion for block display: real line breaks kept, hidden
 * characters escaped, a very long text shortened in the middle (two thirds
 * of the budget from its start, where the attack usually is, one third from
 * its end, where the answer is), and, with `width`, long lines wrapped.
 */
export function fold(text: string, options: FoldOptions = {}): FoldedLine[] {
  const width = options.width ?? Number.POSITIVE_INFINITY;
  const maxChars = options.maxChars ?? DEFAULT_MAX_CHARS;
  const all = units(text);
  const segments: Unit[][] = [all];
  let omitted = 0;
  if (all.length > maxChars) {
    const head = Math.ceil((maxChars * 2) / 3);
    const tail = maxChars - head;
    omitted = all.length - head - tail;
    segments.splice(0, 1, all.slice(0, head), all.slice(all.length - tail));
  }
  const lines: FoldedLine[] = [];
  segments.forEach((segment, index) => {
    if (index > 0) lines.push({ pieces: [], continued: false, omitted });
    let current: TextPiece[] = [];
    let used = 0;
    let continued = false;
    const flush = (next: boolean) => {
      lines.push({ pieces: current, continued });
      current = [];
      used = 0;
      continued = next;
    };
    for (const unit of segment) {
      if (!unit.escaped && unit.text === '\n') {
        flush(false);
        continue;
      }
      if (used + unit.text.length > width && used > 0) flush(true);
      const last = current[current.length - 1];
      if (last && last.escaped === unit.escaped) last.text += unit.text;
      else current.push({ text: unit.text, escaped: unit.escaped });
      used += unit.text.length;
    }
    if (current.length > 0 || lines.length === 0 || segment === segments[segments.length - 1]) flush(false);
  });
  return lines;
}

/** The note standing in for the omitted middle of a long completion. */
export function omissionNote(count: number): string {
  return `[… ${count} more characters …]`;
}

/** A folded completion as plain text (Markdown code blocks, terminals). */
export function foldedText(text: string, options: FoldOptions = {}): string {
  return fold(text, options)
    .map((line) => (line.omitted ? omissionNote(line.omitted) : line.pieces.map((piece) => piece.text).join('')))
    .join('\n');
}

/**
 * Text from the verifier or the corpus quoted inside a sentence (a reason, a
 * decision line, an advice line): on one line, hidden characters escaped,
 * everything else as written. Every quoted completion, gold or example goes
 * through here, so a sentence shows `"\boxed{42}"` exactly as a table does,
 * never JSON's `"\\boxed{42}"`; the terminal and the report writers add only
 * their own layer (escapeTerminal, Markdown or HTML escapes) on top.
 */
export function quoted(text: string, max?: number): string {
  return `"${max === undefined ? showInline(text) : showShort(text, max)}"`;
}
