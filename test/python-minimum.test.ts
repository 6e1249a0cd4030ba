/**
 * The oldest Python each command runs on is stated once (runtime/python-minimum.ts)
 * and every check, message, Python script and the README agree with it: the
 * harness and OpenEnv take 3.10, whatever loads the verifiers library 3.11.
 * The README's smoke section says how to make the interpreter smoke needs
 * with the repository's own script and how to pass it.
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../src/paths.js';
import { buildProgram } from '../src/cli/run.js';
import { MIN_PYTHON, MIN_PYTHON_VERIFIERS, versionText } from '../src/runtime/python-minimum.js';
import { cli } from './support/cli.js';
import { testVenvDir } from './support/test-python.js';

const HARNESS = versionText(MIN_PYTHON);
const VERIFIERS = versionText(MIN_PYTHON_VERIFIERS);

let scratch: string;

/**
 * A real interpreter that says it is Python 3.M when gatekept asks its
 * version, so the check of the minimum is what decides; where the command
 * goes on, the package it is given does not exist, which ends it next.
 */
async function pythonClaiming(minor: number): Promise<string> {
  const file = path.join(await mkdtemp(path.join(scratch, 'python-')), 'python');
  const real = (await execa('python3', ['-c', 'import sys; print(sys.executable)'])).stdout.trim();
  await writeFile(file, `#!/bin/sh\n'${real}' "$@" | sed 's/"version": \\[3, [0-9]*,/"version": [3, ${minor},/'\n`);
  await chmod(file, 0o755);
  return file;
}

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-python-minimum-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('the minimum Python, per command', () => {
  it(`smoke --openenv runs on Python ${HARNESS}, as OpenEnv does`, async () => {
    const python = await pythonClaiming(MIN_PYTHON[1]);
    const run = await cli(['smoke', '--openenv', path.join(scratch, 'no-such-package'), '--python', python]);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).not.toMatch(/PYTHON_TOO_OLD|older than Python/);
    expect(run.stderr).toMatch(/no such directory/);
  });

  it(`smoke --verifiers refuses Python ${HARNESS}: verifiers needs ${VERIFIERS}`, async () => {
    const python = await pythonClaiming(MIN_PYTHON[1]);
    const run = await cli(['smoke', '--verifiers', path.join(scratch, 'no-such-package'), '--python', python]);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toContain(`error [PYTHON_TOO_OLD]: '${python}' is Python ${HARNESS}.`);
    expect(run.stderr).toContain(`older than Python ${VERIFIERS}`);
    expect(run.stderr).toContain(`pass a Python ${VERIFIERS} or newer with --python`);
  });

  it(`gate refuses a Python older than ${HARNESS}, naming ${HARNESS}`, async () => {
    const python = await pythonClaiming(MIN_PYTHON[1] - 1);
    const run = await cli(['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '1', '--python', python]);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toContain(`older than Python ${HARNESS}`);
    expect(run.stderr).toContain(`pass a Python ${HARNESS} or newer with --python`);
  });

  it('the Python scripts check the same minimums', async () => {
    const tuple = (version: readonly number[]) => `(${version.join(', ')})`;
    const harness = await readFile(path.join(PACKAGE_ROOT, 'python', 'harness.py'), 'utf8');
    expect(harness).toContain(`if sys.version_info < ${tuple(MIN_PYTHON)}:`);
    expect(harness).toContain(`needs Python ${HARNESS} or newer`);
    const smoke = await readFile(path.join(PACKAGE_ROOT, 'python', 'smoke.py'), 'utf8');
    const required = [...smoke.matchAll(/require_python\(\((\d+), (\d+)\)\)/g)].map((match) => `${match[1]}.${match[2]}`);
    expect(new Set(required)).toEqual(new Set([HARNESS, VERIFIERS]));
    expect(smoke).toMatch(new RegExp(`def verifiers_mode\\(args\\):[^]*?require_python\\(${tuple(MIN_PYTHON_VERIFIERS).replace(/[()]/g, '\\$&')}\\)`));
  });
});

describe('the README', () => {
  async function readme(): Promise<string> {
    return readFile(path.join(PACKAGE_ROOT, 'README.md'), 'utf8');
  }

  function section(text: string, heading: string): string {
    const start = text.indexOf(`### \`${heading}\``);
    expect(start, heading).toBeGreaterThanOrEqual(0);
    const end = text.indexOf('\n#', start + 4);
    return text.slice(start, end < 0 ? undefined : end);
  }

  it('states the minimums the code enforces, and which commands need the newer one', async () => {
    const text = (await readme()).replace(/\s+/g, ' ');
    expect(text).toContain(`Python ≥ ${HARNESS}`);
    expect(text).toMatch(new RegExp(`\`audit --env\`, \`scan --env\`, \`smoke --verifiers\`\\) need Python ≥ ${VERIFIERS.replace('.', '\\.')}`));
    const smoke = section(await readme(), 'gatekept smoke').replace(/\s+/g, ' ');
    expect(smoke).toContain(`\`--openenv\`, on Python ≥ ${HARNESS}`);
    expect(smoke).toContain(`\`--verifiers\`, on Python ≥ ${VERIFIERS}`);
  });

  it("says how to make smoke's interpreter with the repository's script, and passes it with smoke's own option", async () => {
    const smoke = section(await readme(), 'gatekept smoke');
    const targets = [...smoke.matchAll(/bash scripts\/setup-python-env\.sh ([\w-]+)/g)].map((match) => match[1]!);
    expect(new Set(targets)).toEqual(new Set(['openenv', 'verifiers-v1', 'verifiers-v0']));
    for (const target of targets) expect(existsSync(path.join(PACKAGE_ROOT, 'python', 'requirements', `${target}.txt`)), target).toBe(true);
    const passed = [...smoke.matchAll(/gatekept smoke (--\w+) \S+ (--[\w-]+) "\$\(bash scripts\/setup-python-env\.sh ([\w-]+)\)"/g)];
    expect(passed.map((match) => `${match[1]} ${match[3]}`)).toEqual(['--openenv openenv', '--verifiers verifiers-v1']);
    const program = await buildProgram({ stdout: () => undefined, stderr: () => undefined, stderrIsTty: false }, () => undefined, ['smoke']);
    const flags = program.commands.find((command) => command.name() === 'smoke')!.options.map((option) => option.long);
    for (const match of passed) {
      expect(flags).toContain(match[1]);
      expect(flags).toContain(match[2]);
    }
  });

  it('the script prints the interpreter of an environment it has built', async () => {
    const venv = testVenvDir('openenv');
    if (!existsSync(path.join(venv, '.gatekept-requirements.sha256'))) return;
    const printed = await execa('bash', ['scripts/setup-python-env.sh', 'openenv'], { cwd: PACKAGE_ROOT });
    expect(printed.stdout.trim()).toBe(path.join(venv, 'bin', 'python'));
  });
});
