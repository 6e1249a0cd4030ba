/**
 * The cached virtualenvs that `scripts/setup-python-env.sh` builds, one per
 * target library: tests run the real verifiers and OpenEnv libraries in them
 * instead of mocking them.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

import { execa } from 'execa';

/** The targets, as named by python/requirements/TARGET.txt. */
export type TestTarget = 'verifiers-v0' | 'verifiers-v1' | 'openenv';

/** Same default and override as the setup script. */
export function testVenvDir(target: TestTarget = 'verifiers-v0'): string {
  const root = process.env.GATEKEPT_VENV_ROOT || path.join(homedir(), '.cache', 'gatekept', 'venvs');
  return path.join(root, target);
}

export function testPython(target: TestTarget = 'verifiers-v0'): string {
  const venv = testVenvDir(target);
  const python = path.join(venv, 'bin', 'python');
  // The stamp is written last, so its absence means a build never finished.
  if (!existsSync(python) || !existsSync(path.join(venv, '.gatekept-requirements.sha256'))) {
    throw new Error(`no test virtualenv at ${venv}: run \`bash scripts/setup-python-env.sh ${target}\` first`);
  }
  return python;
}

/**
 * Build and install package directories with the venv's pip. The venv already
 * holds every dependency and build backend, so nothing is resolved or fetched;
 * a reinstall is forced because a local directory keeps its version across edits.
 */
export async function pipInstall(python: string, dirs: readonly string[]): Promise<void> {
  const args = [
    '-m', 'pip', 'install', '--no-deps', '--no-build-isolation', '--no-index', '--force-reinstall',
    '--disable-pip-version-check', '--no-input', '--quiet',
  ];
  await runPip(python, [...args, ...dirs], `pip install ${dirs.join(' ')}`);
}

export async function pipUninstall(python: string, distributions: readonly string[]): Promise<void> {
  const args = ['-m', 'pip', 'uninstall', '--yes', '--quiet', '--disable-pip-version-check'];
  await runPip(python, [...args, ...distributions], `pip uninstall ${distributions.join(' ')}`);
}

async function runPip(python: string, args: string[], what: string): Promise<void> {
  const result = await execa(python, args, { reject: false, timeout: 180_000, stdin: 'ignore' });
  if (result.exitCode !== 0) {
    throw new Error(`${what} failed (exit ${String(result.exitCode)}):\n${result.stderr || result.stdout}`);
  }
}
