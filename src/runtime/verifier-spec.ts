/** The verifier a user names, `package.module:function` or `path/to/file.py:function`, checked and read. */
import { statSync } from 'node:fs';
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
    throw new GatekeptError('BAD_ARGUMENT', `verifier '${spec}' is malformed; ${SPEC_FORMS}`);
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

/** The verifier as named in messages: `module:fn` or `path/to/file.py:fn`. */
export function targetLabel(target: VerifierTarget): string {
  return `${target.kind === 'module' ? target.module : target.path}:${target.fn}`;
}
