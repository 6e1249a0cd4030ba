/**
 * A verifier that fails to import reaches the user as a Python traceback, and
 * most of its frames are gatekept's own (the harness that imported it) and
 * importlib's. The user can only fix their own code, so only the frames of
 * their files are shown, with the exception that ended it.
 */

import { COMPILED_SOURCES } from '../runtime/runtime-cache.js';

const FRAME = /^\s*File "([^"]*)", line \d+/;

/** The harness's own files, as a frame names them. */
const MACHINERY_FILES: ReadonlySet<string> = new Set(COMPILED_SOURCES);

/** Frames that are the machinery of the import, never the user's code. */
function isMachinery(file: string): boolean {
  return MACHINERY_FILES.has(file.split(/[\\/]/).pop()!) || file.startsWith('<frozen ');
}

/**
 * The traceback without gatekept's and importlib's frames and without the
 * "Traceback (most recent call last):" headers and caret lines. The final
 * line is dropped when it only repeats `message`. With no frame of the
 * verifier left (the failure was in the machinery), the traceback is kept
 * whole, since hiding it would hide the cause.
 */
export function verifierTraceback(traceback: string, message?: string): string[] {
  const lines = traceback.split('\n').map((line) => line.trimEnd());
  const kept: string[] = [];
  let skipping = false;
  let userFrames = 0;
  for (const line of lines) {
    const frame = FRAME.exec(line);
    if (frame) {
      skipping = isMachinery(frame[1]!);
      if (!skipping) {
        userFrames++;
        kept.push(line);
      }
      continue;
    }
    // A frame's source line and caret markers are indented below it.
    if (/^\s{4,}/.test(line) && (skipping || kept.length > 0)) {
      if (!skipping && !/^\s*[~^]+\s*$/.test(line)) kept.push(line);
      continue;
    }
    skipping = false;
    if (line.length === 0 || line === 'Traceback (most recent call last):') continue;
    kept.push(line);
  }
  if (userFrames === 0) return lines.filter((line) => line.length > 0);
  if (message !== undefined && kept[kept.length - 1] === message) kept.pop();
  return kept;
}
