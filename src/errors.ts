/**
 * The error vocabulary of gatekept. A gate REJECT is never an error: it is a
 * result. Errors are for input the user must fix (exit 2) and for failures of
 * the machinery itself (exit 3).
 */

export const EXIT = {
  pass: 0,
  reject: 1,
  badInput: 2,
  internal: 3,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** Codes name the kind of failure; the CLI maps each kind to an exit code. */
export type ErrorCode =
  // bad input (exit 2)
  | 'BAD_ARGUMENT'
  | 'BAD_POLICY'
  | 'BAD_SEED'
  | 'BAD_DATASET'
  | 'FILE_NOT_FOUND'
  | 'NOT_A_REGULAR_FILE'
  | 'INPUT_TOO_LARGE'
  | 'OUT_DIR_NOT_EMPTY'
  | 'OUT_DIR_UNWRITABLE'
  | 'PYTHON_NOT_FOUND'
  | 'PYTHON_TOO_OLD'
  | 'PYTHON_PACKAGE_MISSING'
  | 'VERIFIER_NOT_FOUND'
  | 'VERIFIER_IMPORT_FAILED'
  | 'VERIFIER_NOT_CALLABLE'
  | 'SANDBOX_UNAVAILABLE'
  // could not audit: internal or harness failure, or a verifier that did not load in time (exit 3)
  | 'VERIFIER_IMPORT_TIMEOUT'
  | 'HARNESS_FAILED'
  | 'HARNESS_PROTOCOL'
  | 'ENV_START_FAILED'
  | 'INTERNAL';

const INTERNAL_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  // Not the user's input: a busy machine or a slow library; nothing was decided.
  'VERIFIER_IMPORT_TIMEOUT',
  'HARNESS_FAILED',
  'HARNESS_PROTOCOL',
  'ENV_START_FAILED',
  'INTERNAL',
]);

export class GatekeptError extends Error {
  readonly code: ErrorCode;
  /** What the user should do about it, in one sentence. */
  readonly suggestion: string | undefined;
  /** Extra lines (one per invalid field, a stderr tail...). */
  readonly details: readonly string[];

  constructor(code: ErrorCode, message: string, options: { suggestion?: string; details?: readonly string[]; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatekeptError';
    this.code = code;
    this.suggestion = options.suggestion;
    this.details = options.details ?? [];
  }

  get exitCode(): ExitCode {
    return INTERNAL_CODES.has(this.code) ? EXIT.internal : EXIT.badInput;
  }
}

export function isGatekeptError(value: unknown): value is GatekeptError {
  return value instanceof GatekeptError;
}

/** Render an error for a terminal: message, details, then the suggestion. */
export function formatError(error: unknown): string {
  if (isGatekeptError(error)) {
    const lines = [`error [${error.code}]: ${error.message}`];
    for (const detail of error.details) lines.push(`  - ${detail}`);
    if (error.suggestion) lines.push(`  fix: ${error.suggestion}`);
    return lines.join('\n');
  }
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
  return `internal error: ${message}\n  this is a bug in gatekept; please report it with the command you ran.`;
}

/**
 * The closing line of a run that ended in an error: the same three words as
 * every verdict (PASS, REJECT, COULD NOT DECIDE), so the word a person reads
 * is the exit code's. Bad input has no verdict at all.
 */
export function outcomeLine(exitCode: ExitCode): string {
  return exitCode === EXIT.internal
    ? 'COULD NOT DECIDE (exit 3): the audit did not finish, so it says nothing either way about the verifier; see the error above.'
    : 'no verdict (bad input, exit 2): fix what the error names and run again.';
}

export function exitCodeFor(error: unknown): ExitCode {
  return isGatekeptError(error) ? error.exitCode : EXIT.internal;
}
