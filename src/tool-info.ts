import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from './paths.js';

const manifest = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { name: string; version: string };

/** The tool's own name and version, as recorded in every audit. */
export const TOOL = { name: manifest.name, version: manifest.version } as const;
