import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { GatekeptError } from '../errors.js';

/**
 * Start a Python process of ours (the verifier harness, or the smoke helper)
 * as the leader of its own process group, so the whole group can be killed
 * at once, and turn a missing interpreter into an error that says what to do.
 */
export async function spawnPython(
  python: string,
  args: readonly string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; stdio: StdioOptions; minimumVersion: string },
): Promise<ChildProcess> {
  const child = spawn(python, ['-B', '-X', 'utf8', ...args], {
    cwd: options.cwd,
    env: options.env,
    stdio: options.stdio,
    detached: true,
    windowsHide: true,
  });
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EACCES' || code === 'ENOTDIR' || code === 'EISDIR') {
      throw new GatekeptError('PYTHON_NOT_FOUND', `cannot run Python interpreter '${python}' (${code})`, {
        suggestion: `install Python ${options.minimumVersion} or newer, or pass its path with --python`,
        cause: error,
      });
    }
    throw new GatekeptError('HARNESS_FAILED', `starting '${python}' failed: ${String(error)}`, { cause: error });
  }
  return child;
}
