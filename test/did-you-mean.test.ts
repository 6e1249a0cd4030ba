/**
 * A mistyped option or policy key is named with the one meant: commander's
 * suggestion for options, before any complaint that a required option is
 * missing, and the nearest key of the same section for a policy. An invalid
 * value of a repeatable option is named as it was typed, never by the field
 * path inside the parsed options.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../src/cli/run.js';
import { editDistance, nearestName } from '../src/did-you-mean.js';
import { cli, cliInProcess } from './support/cli.js';

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-did-you-mean-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('a mistyped option', () => {
  it.each([
    [['gate', '--rewards', 'x.py:f', '--answer', '1'], '--rewards', '--reward'],
    [['scan', '--result', 'rollouts.jsonl', '--reward', 'x.py:f'], '--result', '--results'],
    [['pack', '--seeds', 'seed.json', '--out', 'out'], '--seeds', '--seed'],
    [['audit', '--evn', 'my-env'], '--evn', '--env'],
    [['smoke', '--verifier', 'dir'], '--verifier', '--verifiers'],
  ])('%j: unknown, with the option meant, even when a required option is missing', async (args, typed, meant) => {
    const run = await cli(args);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toContain(`unknown option '${typed}'`);
    expect(run.stderr).toContain(`(Did you mean ${meant}?)`);
    expect(run.stderr).not.toMatch(/required option/);
  });

  it('a required option that is missing is still named, once no option is unknown', async () => {
    const run = await cli(['gate', '--answer', '1']);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toMatch(/required option '--reward <spec>' not specified/);
    // A usage mistake closes as every bad input does: no verdict.
    expect(run.stderr.trimEnd().split('\n').at(-1)).toMatch(/^no verdict \(bad input, exit 2\)/);
  });

  it('every long option of every command, mistyped, is suggested back', async () => {
    const program = await buildProgram({ stdout: () => undefined, stderr: () => undefined, stderrIsTty: false }, () => undefined, ['audit']);
    const misses: string[] = [];
    for (const command of program.commands) {
      for (const option of command.options) {
        if (!option.long) continue;
        // One letter dropped from the middle of the name: a slip, not another option.
        const name = option.long.slice(2);
        const middle = Math.floor(name.length / 2);
        const typed = `--${name.slice(0, middle)}${name.slice(middle + 1)}`;
        if (command.options.some((other) => other.long === typed)) continue;
        const run = await cliInProcess([command.name(), typed, 'x']);
        if (run.exitCode !== 2 || !run.stderr.includes(`unknown option '${typed}'`) || !run.stderr.includes(option.long)) {
          misses.push(`${command.name()} ${typed}: ${run.stderr}`);
        }
      }
    }
    expect(misses).toEqual([]);
  });
});

describe('an invalid value of a repeatable option', () => {
  it('is named as typed (--format), never by its field path (--format.0)', async () => {
    const run = await cli(['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '1', '--format', 'yaml']);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toMatch(/ {2}- --format: --format takes /);
    expect(run.stderr).not.toMatch(/--format\.\d/);
  });

  it('names which value, when the option was given more than once', async () => {
    const run = await cli(['audit', '--env', 'my-env', '--format', 'json', '--format', 'yaml']);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toMatch(/ {2}- the 2nd --format: --format takes /);
    expect(run.stderr).not.toMatch(/--format\.\d/);
  });
});

describe('a mistyped policy key', () => {
  async function policyRun(text: string) {
    const file = path.join(await mkdtemp(path.join(scratch, 'policy-')), 'policy.toml');
    await writeFile(file, text);
    return cli(['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '1', '--policy', file]);
  }

  it.each([
    ['max_hackabilty = 10\n', /- max_hackabilty: unknown key at the top level; did you mean max_hackability\?/],
    ['[timeouts]\ncal_ms = 5\n', /- timeouts\.cal_ms: unknown key in \[timeouts\]; did you mean call_ms\?/],
    ['[env_audit.weights]\nintegrty = 1\n', /- env_audit\.weights\.integrty: unknown key in \[env_audit\.weights\]; did you mean integrity\?/],
    ['[scan]\nmax_exploit_rate = 0.1\n', /- scan\.max_exploit_rate: unknown key in \[scan\]; did you mean max_exploit_rate_ci_hi\?/],
  ])('%j names the key, its section and the key meant', async (text, message) => {
    const run = await policyRun(text);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toMatch(/error \[BAD_POLICY\]/);
    expect(run.stderr).toMatch(message);
  });

  it('lists the section’s keys when none is near, and each unknown key on its own line', async () => {
    const run = await policyRun('seeed = 1\n[sandbox]\nenabled = true\n');
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toMatch(/^ {2}- seeed: unknown key at the top level; did you mean seed\?$/m);
    expect(run.stderr).toMatch(/^ {2}- sandbox: unknown key at the top level; the keys there are max_hackability, .*timeouts, .*scan$/m);
  });
});

describe('the edit distance behind the policy suggestions', () => {
  it('counts a swap of neighbours as one slip and suggests only what is near', () => {
    expect(editDistance('cal_ms', 'call_ms')).toBe(1);
    expect(editDistance('sede', 'seed')).toBe(1);
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(nearestName('sede', ['strict', 'seed'])).toBe('seed');
    expect(nearestName('sandbox', ['scan', 'seed', 'strict'])).toBeUndefined();
  });
});
