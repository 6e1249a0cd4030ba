import { existsSync } from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../src/paths.js';

describe('the published library', () => {
  it('resolves through the package exports map, with its type declarations', async () => {
    const script = [
      "const lib = await import('gatekept');",
      "const policy = await lib.loadPolicy('policy.toml');",
      'console.log(JSON.stringify({ names: Object.keys(lib).sort(), max: policy.maxHackability, exit: lib.EXIT }));',
    ].join('\n');
    const run = await execa(process.execPath, ['--input-type=module', '-e', script], { cwd: PACKAGE_ROOT });
    const out = JSON.parse(run.stdout);
    for (const name of ['gate', 'gatekeep', 'loadPolicy', 'smoke', 'DEFAULT_POLICY', 'GatekeptError']) expect(out.names).toContain(name);
    expect(out.max).toBe(15);
    expect(out.exit).toEqual({ pass: 0, reject: 1, badInput: 2, internal: 3 });
    expect(existsSync(path.join(PACKAGE_ROOT, 'dist', 'index.d.ts'))).toBe(true);
  });
});
