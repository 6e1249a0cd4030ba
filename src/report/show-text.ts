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
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u115f\u1160\u3164\uffa0\ufe00-\ufe0f\u{e0100}-\u{e01ef}\p{Cs}]/u;

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
    if (HIDDEN.test(char)) push(escapeChar(char), true);
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

/** One line, cut to `max` characters (code points) with a visible marker, for tables. */
export function showShort(text: string, max = 48): string {
  const shown = [...showInline(text)];
  return shown.length <= max ? shown.join('') : `${shown.slice(0, max - 1).join('')}…`;
}

export interface FoldOptions {
  /** Longest line shown, in characters; longer lines wrap. */
  width?: number;
  /** Most lines shown; the middle of a longer text is left out with a note saying how much. */
  maxLines?: number;
}

/** A folded line: its pieces, and whether it continues a line that was wrapped. */
export interface FoldedLine {
  pieces: TextPiece[];
  continued: boolean;
}

export interface Folded {
  lines: FoldedLine[];
  /** Lines left out of the middle (0 when everything is shown). */
  omittedLines: number;
}

/**
 * Fold a completion for block display: real line breaks kept, hidden
 * characters escaped, long lines wrapped at `width` (an escape is never
 * split), and a very long text shortened in the middle.
 */
export function fold(text: string, options: FoldOptions = {}): Folded {
  const width = options.width ?? 80;
  const maxLines = options.maxLines ?? 24;
  const lines: FoldedLine[] = [];
  let current: TextPiece[] = [];
  let used = 0;
  let continued = false;
  const flush = (next: boolean) => {
    lines.push({ pieces: current, continued });
    current = [];
    used = 0;
    continued = next;
  };
  const add = (value: string, escaped: boolean) => {
    const last = current[current.length - 1];
    if (last && last.escaped === escaped) last.text += value;
    else current.push({ text: value, escaped });
    used += [...value].length;
  };
  for (const piece of pieces(text, true)) {
    if (piece.escaped) {
      // Each escape is one unit: `\u200b` must not be cut in two.
      for (const unit of piece.text.match(/\\(?:u\{[0-9a-f]+\}|u[0-9a-f]{4}|x[0-9a-f]{2}|[ntr])/g) ?? []) {
        if (used + unit.length > width && used > 0) flush(true);
        add(unit, true);
      }
      continue;
    }
    for (const char of piece.text) {
      if (char === '\n') {
        flush(false);
        continue;
      }
      if (used >= width) flush(true);
      add(char, false);
    }
  }
  if (current.length > 0 || lines.length === 0) flush(false);
  if (lines.length <= maxLines) return { lines, omittedLines: 0 };
  const head = Math.ceil((maxLines - 1) / 2);
  const tail = maxLines - 1 - head;
  return { lines: [...lines.slice(0, head), ...lines.slice(lines.length - tail)], omittedLines: lines.length - head - tail };
}

/** Where the omitted middle of a folded text goes, counted from the top. */
export function omissionIndex(folded: Folded, maxLines = 24): number {
  return folded.omittedLines === 0 ? -1 : Math.ceil((maxLines - 1) / 2);
}

/** A folded completion as plain text (Markdown code blocks, terminals). */
export function foldedText(text: string, options: FoldOptions = {}): string {
  const folded = fold(text, options);
  const rendered = folded.lines.map((line) => line.pieces.map((piece) => piece.text).join(''));
  if (folded.omittedLines > 0) {
    rendered.splice(omissionIndex(folded, options.maxLines ?? 24), 0, `[… ${folded.omittedLines} more lines …]`);
  }
  return rendered.join('\n');
}
