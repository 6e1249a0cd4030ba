import { statSync } from 'node:fs';
import path from 'node:path';

/**
 * The interpreter to use: --python, else $GATEKEPT_PYTHON, else python3. A
 * virtual environment's directory stands for its own interpreter.
 */
export function defaultPython(explicit: string | undefined): string {
  const chosen = explicit ?? process.env.GATEKEPT_PYTHON ?? 'python3';
  try {
    if (statSync(chosen).isDirectory()) {
      const inside = path.join(chosen, 'bin', 'python');
      if (statSync(inside).isFile()) return inside;
    }
  } catch {
    // not a directory with an interpreter: the interpreter check names the bad path
  }
  return chosen;
}
