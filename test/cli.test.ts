import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, cliInProcess } from './support/cli.js';
import { testPython, testVenvDir } from './support/test-python.js';

const python = process.env.GATEKEPT_PYTHON ?? 'python3';

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-cli-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('gatekept gate (CLI)', () => {
  it('exit 0 and a scorecard for a strict verifier', async () => {
    const run = await cli(['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--python', python]);
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toMatch(/^decision: PASS$/m);
    expect(run.stdout).toMatch(/^exploits: none in \d+ judged candidates$/m);
    expect(run.stdout).toMatch(/^\d+ families \(\d+ attempts\) found no exploit: /m);
    expect(run.stdout).toMatch(/not a proof/);
  });

  it('exit 1 with reasons, worst examples and hardening advice for a substring verifier', async () => {
    const run = await cli(['gate', '--reward', 'examples/verifiers/substring.py:reward', '--answer', '42', '--python', python]);
    expect(run.exitCode).toBe(1);
    expect(run.stdout).toMatch(/decision: REJECT/);
    expect(run.stdout).toMatch(/^ {2}family +hacks\/attempts +severity +worst example$/m);
    expect(run.stdout).toMatch(/^ {2}substring-containment +[1-9]\d*\/\d+ +critical/m);
    expect(run.stdout).toMatch(/hardening:/);
  });

  it('--json prints the audit record with every documented field', async () => {
    const run = await cli(['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--json', '--python', python]);
    expect(run.exitCode).toBe(0);
    const record = JSON.parse(run.stdout);
    for (const key of [
      'schema',
      'decision',
      'reasons',
      'hackability',
      'hack_rate',
      'policy',
      'seed',
      'corpus',
      'verifier',
      'families',
      'findings',
      'honest',
      'tool',
    ]) {
      expect(record).toHaveProperty(key);
    }
    expect(record.hack_rate).toMatchObject({ point: 0, n: expect.any(Number), lo: expect.any(Number), hi: expect.any(Number) });
    expect(record.corpus).toMatchObject({ version: expect.any(String), hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(record.verifier).toMatchObject({ spec: 'examples/verifiers/strict.py:reward', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
  });

  it('--seed and the policy seed change the record deterministically', async () => {
    const args = ['gate', '--reward', 'examples/verifiers/substring.py:reward', '--answer', '42', '--json', '--python', python, '--seed', '5'];
    const [a, b] = await Promise.all([cli(args), cli(args)]);
    const strip = (text: string) => {
      const { timing: _timing, ...rest } = JSON.parse(text);
      return JSON.stringify(rest);
    };
    expect(strip(a.stdout)).toBe(strip(b.stdout));
    expect(JSON.parse(a.stdout).seed).toBe(5);
  });

  it.each([
    [['gate', '--answer', '42'], /--reward/],
    [['gate', '--reward', 'no-colon-here', '--answer', '42'], /module:function|file\.py:function|:fn/i],
    [['gate', '--reward', 'examples/verifiers/missing.py:reward', '--answer', '42'], /missing\.py/],
    [['gate', '--reward', 'examples/verifiers/strict.py:reward'], /--answer/],
    [['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--dataset', 'x.jsonl'], /exactly one of --answer/],
    [['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--seed', 'abc'], /--seed/],
    [['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--policy', 'nope.toml'], /nope\.toml/],
    [['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--format', 'yaml'], /format/],
    [['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--python', '/nonexistent/python3'], /python/i],
    [['gate', '--reward', 'examples/verifiers/strict.py:nope', '--answer', '42'], /nope/],
    [['frobnicate'], /unknown command/],
  ])('exit 2 for bad input: %j', async (args, message) => {
    // Refused before any audit: the in-process entry shows it as well as a new process would.
    const run = await cliInProcess([...args, ...(args.includes('--python') || args[0] !== 'gate' ? [] : ['--python', python])]);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toMatch(message);
  });

  it('exit 2 naming the key for an invalid policy', async () => {
    const policy = path.join(scratch, 'bad.toml');
    await writeFile(policy, 'max_hackability = 0\n[timeouts]\ncall = 3\n');
    const run = await cli(['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--policy', policy, '--python', python]);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toMatch(/max_hackability: .*vacuous/);
    expect(run.stderr).toMatch(/timeouts\.call: unknown key/);
  });

  it('exit 3 when the harness itself fails', async () => {
    // An interpreter that answers as Python when asked what it is, but never speaks the protocol.
    const fake = path.join(scratch, 'fake-python');
    await writeFile(fake, `#!/bin/sh\ncase "$*" in *GATEKEPT-PROBE*) exec ${python} "$@";; esac\necho "not python" >&2\nexit 0\n`);
    await chmod(fake, 0o755);
    const run = await cli(['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--python', fake, '--sandbox', 'none']);
    expect(run.exitCode).toBe(3);
    expect(run.stderr).toMatch(/error \[HARNESS_FAILED\]/);
  });

  it('--python accepts a virtual environment directory', async () => {
    testPython(); // fails with a clear message when the test venv was not built
    const run = await cli(['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--json', '--python', testVenvDir()]);
    expect(run.exitCode).toBe(0);
    expect(JSON.parse(run.stdout).decision).toBe('PASS');
  });

  it('--help lists the options and exits 0', async () => {
    const run = await cli(['gate', '--help']);
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toMatch(/--answer-type/);
    expect(run.stdout).toMatch(/--dataset/);
  });
});
