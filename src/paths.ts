import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package root: the nearest directory above this module holding the
 * package's manifest. Searching, rather than assuming a depth, keeps it right
 * for src/ (tests), dist/ (the library) and a bundled CLI alike.
 */
function findPackageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'attacks'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
    dir = parent;
  }
}

export const PACKAGE_ROOT = findPackageRoot();

export const HARNESS_PATH = path.join(PACKAGE_ROOT, 'python', 'harness.py');
export const ATTACKS_DIR = path.join(PACKAGE_ROOT, 'attacks');
export const TEMPLATES_DIR = path.join(PACKAGE_ROOT, 'templates');
export const DEFAULT_POLICY_PATH = path.join(PACKAGE_ROOT, 'policy.toml');
