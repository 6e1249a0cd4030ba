/**
 * docs/examples/ is what the built CLI prints on the bundled fixtures:
 * `scripts/examples.ts --check` regenerates it into a temporary directory and
 * fails on any difference. `gate` and `scan` take seconds and are checked
 * here; `audit --env` loads the verifiers library three times (over a
 * minute on two cores), so its cases are checked by `npm run examples:check`.
 */
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../src/paths.js';
import { normalise } from '../scripts/normalise-output.js';

const SCRIPT = path.join(PACKAGE_ROOT, 'scripts', 'examples.ts');
const TSX = path.join(PACKAGE_ROOT, 'node_modules', '.bin', 'tsx');

function examples(args: readonly string[]) {
  return execa(TSX, [SCRIPT, ...args], { cwd: PACKAGE_ROOT, reject: false, stdin: 'ignore', all: true });
}

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-examples-test-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('docs/examples', () => {
  it("keeps no progress line, however many the machine's speed gave", () => {
    const slow = [
      'loading: 10 s',
      'loading: 20 s',
      'gating reward a: 12/40 calls in 10 s, about 23 s left',
      'gating reward a: 40/40 calls in 31 s',
      'PASS: 10.0',
      'integrity: 3 s',
    ];
    expect(normalise(slow.join('\n'))).toBe('PASS: 10.0\nintegrity: <t> s');
    expect(normalise(['gating reward a: 40/40 calls in 12 s', 'PASS: 10.0', 'integrity: 3 s'].join('\n'))).toBe('PASS: 10.0\nintegrity: <t> s');
  });

  it('the gate and scan examples are what the CLI prints now', async () => {
    const run = await examples(['--check', '--only', 'gate,scan']);
    expect(run.all).toMatch(/is up to date \(6 cases\)/);
    expect(run.exitCode).toBe(0);
  });

  it('--check names a file that differs, with the lines', async () => {
    const copy = path.join(scratch, 'examples');
    await cp(path.join(PACKAGE_ROOT, 'docs', 'examples'), copy, { recursive: true });
    const file = path.join(copy, 'scan-undecided.txt');
    await writeFile(file, (await readFile(file, 'utf8')).replace('12 rollouts', '13 rollouts'));
    const run = await examples(['--check', '--only', 'scan', '--against', copy]);
    expect(run.exitCode).toBe(1);
    expect(run.all).toContain(`${file} differs`);
    expect(run.all).toMatch(/\d- +13 rollouts/);
    expect(run.all).toMatch(/\d\+ +12 rollouts/);
  });

  it('each file holds the command line, stable placeholders for machine paths, and the exit code', async () => {
    const index = await readFile(path.join(PACKAGE_ROOT, 'docs', 'examples', 'README.md'), 'utf8');
    const names = [...index.matchAll(/\]\(([\w-]+\.txt)\)/g)].map((match) => match[1]!);
    expect(names).toHaveLength(10);
    expect(names).toContain('audit-env-bad-input.txt');
    // Each command's three outcomes, each with its own exit code.
    const exits = { sound: 0, gameable: 1, undecided: 3 };
    for (const command of ['gate', 'scan', 'audit-env']) {
      for (const [name, code] of Object.entries(exits)) {
        expect(names).toContain(`${command}-${name}.txt`);
        const text = await readFile(path.join(PACKAGE_ROOT, 'docs', 'examples', `${command}-${name}.txt`), 'utf8');
        expect(text, `${command}-${name}`).toMatch(new RegExp(`\\n\\[exit ${code}\\]\\n$`));
      }
    }
    for (const name of names) {
      const text = await readFile(path.join(PACKAGE_ROOT, 'docs', 'examples', name), 'utf8');
      expect(text).toMatch(/^\$ gatekept (gate|scan|audit) /);
      expect(text).toMatch(/\n\[exit [0-3]\]\n$/);
      expect(text).not.toContain(PACKAGE_ROOT);
      expect(text).not.toContain(os.homedir());
    }
  });
});
