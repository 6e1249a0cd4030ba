/**
 * Text that comes from a verifier (exception messages, tracebacks, output,
 * side-effect details) ends up on a terminal. Escape sequences in it could
 * redraw the screen, a fake PASS for example, so every control character
 * except the newline is shown as an escape instead.
 */

// C0 controls but \n, DEL, C1 controls, and the bidirectional overrides that reorder text.
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;

export function escapeControl(text: string): string {
  return text.replace(CONTROL, (char) => {
    const code = char.codePointAt(0)!;
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** The same for one line: newlines are escaped too, so a line stays a line. */
export function escapeLine(text: string): string {
  return escapeControl(text).replace(/\n/g, '\\n');
}
