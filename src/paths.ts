import { fileURLToPath } from 'node:url';
import path from 'node:path';

// This file sits directly under src/ (and dist/ once built), so the package
// root is one level up in both layouts.
export const PACKAGE_ROOT = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..');

export const HARNESS_PATH = path.join(PACKAGE_ROOT, 'python', 'harness.py');
export const ATTACKS_DIR = path.join(PACKAGE_ROOT, 'attacks');
export const TEMPLATES_DIR = path.join(PACKAGE_ROOT, 'templates');
export const DEFAULT_POLICY_PATH = path.join(PACKAGE_ROOT, 'policy.toml');
