/** The verifier a user names, `package.module:function` or `path/to/file.py:function`, checked and read. */
import { closeSync, constants, fstatSync, openSync, readSync, statSync } from 'node:fs';
import path from 'node:path';
import { GatekeptError } from '../errors.js';

/** Where the verifier is: a function of an importable module, or of a .py file. */
export type VerifierTarget = { kind: 'module'; module: string; fn: string } | { kind: 'file'; path: string; fn: string };

const PY_IDENTIFIER = /^[\p{L}_][\p{L}\p{N}_]*$/u;
const SPEC_FORMS = "expected 'package.module:function' or 'path/to/file.py:function'";

function isDottedName(value: string): boolean {
  return value.length > 0 && value.split('.').every((part) => PY_IDENTIFIER.test(part));
}

export function parseVerifierSpec(spec: string, cwd: string): VerifierTarget {
  const colon = spec.lastIndexOf(':');
  const where = colon > 0 ? spec.slice(0, colon).trim() : '';
  const fn = colon > 0 ? spec.slice(colon + 1).trim() : '';
  if (!where || !fn) {
    throw new GatekeptError('BAD_ARGUMENT', `verifier '${spec}' is malformed; ${SPEC_FORMS}`, { suggestion: functionSuggestion(spec, cwd) });
  }
  if (!isDottedName(fn)) {
    throw new GatekeptError('BAD_ARGUMENT', `'${fn}' in verifier '${spec}' is not a Python function name; ${SPEC_FORMS}`);
  }
  const looksLikePath = where.endsWith('.py') || where.includes('/') || where.includes(path.sep);
  if (!looksLikePath) {
    if (!isDottedName(where)) {
      throw new GatekeptError('BAD_ARGUMENT', `'${where}' in verifier '${spec}' is neither a module name nor a .py file; ${SPEC_FORMS}`);
    }
    return { kind: 'module', module: where, fn };
  }
  if (!where.endsWith('.py')) {
    throw new GatekeptError('BAD_ARGUMENT', `'${where}' in verifier '${spec}' looks like a path but does not end in .py; ${SPEC_FORMS}`);
  }
  const absolute = path.resolve(cwd, where);
  let isFile = false;
  try {
    isFile = statSync(absolute).isFile();
  } catch {
    throw new GatekeptError('VERIFIER_NOT_FOUND', `verifier file ${where} does not exist`, {
      suggestion: 'check the path; relative paths are taken from the current directory',
    });
  }
  if (!isFile) {
    throw new GatekeptError('VERIFIER_NOT_FOUND', `verifier path ${where} is not a file`);
  }
  return { kind: 'file', path: absolute, fn };
}

/** Most of a file read to name the functions it defines: enough for any reward module. */
const SCANNED_BYTES = 1 << 20;
const NAMED_FUNCTIONS = 8;

/**
 * For a spec that names a .py file without its function: the functions the
 * file defines at its top level, read as text (nothing of it runs here).
 */
function functionSuggestion(spec: string, cwd: string): string {
  const where = spec.replace(/:\s*$/, '').trim();
  const generic = `name the function after a colon: '${where || 'path/to/file.py'}:FUNCTION'`;
  if (!where.endsWith('.py')) return generic;
  let text: string;
  try {
    // Followed like the spec's own file (a link to it is the user's); never waited on (a FIFO).
    const fd = openSync(path.resolve(cwd, where), constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      if (!fstatSync(fd).isFile()) return generic;
      const buffer = Buffer.alloc(SCANNED_BYTES);
      text = buffer.toString('utf8', 0, readSync(fd, buffer, 0, SCANNED_BYTES, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return generic;
  }
  const names = [...new Set([...text.matchAll(/^(?:async[ \t]+)?def[ \t]+([\p{L}_][\p{L}\p{N}_]*)[ \t]*\(/gmu)].map((match) => match[1]!))];
  if (names.length === 0) return `${generic} (no function is defined at the top level of ${where})`;
  const shown = names.slice(0, NAMED_FUNCTIONS).join(', ');
  const example = names.find((name) => /reward/i.test(name)) ?? names[0];
  return `${generic}, e.g. '${where}:${example}'; defined at its top level: ${shown}${names.length > NAMED_FUNCTIONS ? ', …' : ''}`;
}

/** The verifier as named in messages: `module:fn` or `path/to/file.py:fn`. */
export function targetLabel(target: VerifierTarget): string {
  return `${target.kind === 'module' ? target.module : target.path}:${target.fn}`;
}
