/**
 * Every file an emitter writes that is not data comes from a template under
 * `templates/`, so Python, TOML, YAML and Markdown live in files of their own
 * kind, readable and lintable, and the TypeScript only decides the values.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { GatekeptError } from '../errors.js';
import { PACKAGE_ROOT, TEMPLATES_DIR } from '../paths.js';

/** `{{name}}`: a lowercase identifier between double braces; nothing else is special. */
const PLACEHOLDER = /\{\{([a-z][a-z0-9_]*)\}\}/g;

const cache = new Map<string, string>();

/** A template's text, read once per process. */
function readTemplate(relativePath: string): string {
  let text = cache.get(relativePath);
  if (text === undefined) {
    text = readFileSync(path.join(TEMPLATES_DIR, relativePath), 'utf8');
    cache.set(relativePath, text);
  }
  return text;
}

/** A file shipped as is (e.g. `python/gatekept_reward.py`), relative to the package root. */
export function readShippedFile(relativePath: string): string {
  let text = cache.get(`/${relativePath}`);
  if (text === undefined) {
    text = readFileSync(path.join(PACKAGE_ROOT, relativePath), 'utf8');
    cache.set(`/${relativePath}`, text);
  }
  return text;
}

/**
 * Fill a template's placeholders with values the caller has already escaped
 * for the file's language. A placeholder without a value, or a value no
 * placeholder uses, is a bug in the emitter, so both throw.
 */
export function renderTemplate(relativePath: string, values: Readonly<Record<string, string>>): string {
  const template = readTemplate(relativePath);
  const used = new Set<string>();
  const missing = new Set<string>();
  const text = template.replace(PLACEHOLDER, (_match, name: string) => {
    const value = values[name];
    if (value === undefined) {
      missing.add(name);
      return '';
    }
    used.add(name);
    return value;
  });
  const unused = Object.keys(values).filter((name) => !used.has(name));
  if (missing.size > 0 || unused.length > 0) {
    throw new GatekeptError('INTERNAL', `template ${relativePath} does not match its values`, {
      details: [...[...missing].map((name) => `no value for {{${name}}}`), ...unused.map((name) => `value ${name} is not used`)],
    });
  }
  return text;
}
