/**
 * Text that comes from a verifier (exception messages, tracebacks, output,
 * side-effect details) ends up on a terminal. Escape sequences in it could
 * redraw the screen, a fake PASS for example, so every control character
 * except the newline is shown as an escape instead.
 */

/** C0 controls but \n, DEL, C1 controls, and the bidirectional marks and overrides that reorder text. */
function isControl(code: number): boolean {
  return (
    (code <= 0x1f && code !== 0x0a) ||
    (code >= 0x7f && code <= 0x9f) ||
    code === 0x061c ||
    code === 0x200e ||
    code === 0x200f ||
    (code >= 0x202a && code <= 0x202e) ||
    (code >= 0x2066 && code <= 0x2069)
  );
}

export function escapeControl(text: string): string {
  let escaped = '';
  let changed = false;
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (isControl(code)) {
      changed = true;
      escaped += code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
    } else {
      escaped += char;
    }
  }
  return changed ? escaped : text;
}

/** The same for one line: newlines are escaped too, so a line stays a line. */
export function escapeLine(text: string): string {
  return escapeControl(text).replace(/\n/g, '\\n');
}

/**
 * What the command line writes to a terminal, whatever it holds: every
 * control character but the newline and the tab of its own layout is shown as
 * `\uXXXX`. That form is also a JSON escape of the same character, so JSON
 * printed through it parses to the same value (JSON.stringify leaves C1
 * controls and bidi overrides raw inside strings).
 */
export function escapeTerminal(text: string): string {
  let escaped = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x09 || !isControl(code)) continue;
    escaped += `${text.slice(from, i)}\\u${code.toString(16).padStart(4, '0')}`;
    from = i + 1;
  }
  return from === 0 ? text : escaped + text.slice(from);
}
