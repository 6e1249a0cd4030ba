/**
 * The cached virtualenvs that `scripts/setup-python-env.sh` builds, one per
 * target library: tests run the real verifiers and OpenEnv libraries in them
 * instead of mocking them.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { setupVenvDir } from '../../src/runtime/resolve-python.js';

/** The targets, as named by python/requirements/TARGET.txt. */
export type TestTarget = 'verifiers-v0' | 'verifiers-v1' | 'openenv' | 'ray';

/** Same default and override as the setup script. */
export function testVenvDir(target: TestTarget = 'verifiers-v0'): string {
  return setupVenvDir(target);
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
