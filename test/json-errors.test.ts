/**
 * A run asked for JSON that ends before any record (bad input, exit 2) still
 * prints JSON on stdout: a script that reads stdout learns why, not nothing.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { run } from '../src/cli/run.js';
import type { Io } from '../src/cli/io.js';
import { testPython } from './support/test-python.js';

async function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: Io = {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    stderrIsTty: false,
  };
  const code = await run(argv, io);
  return { code, stdout, stderr };
}

it('a bad option under --json prints the error as JSON on stdout, and the message on stderr', async () => {
  const result = await cli(['gate', '--reward', 'no_such_module:reward', '--answer', '42', '--seed', 'x', '--json']);
  expect(result.code).toBe(2);
  const parsed = JSON.parse(result.stdout) as { schema: string; exit_code: number; error: { code: string; message: string; details: string[] } };
  expect(parsed.schema).toBe('gatekept.error/v1');
  expect(parsed.exit_code).toBe(2);
  expect(parsed.error.code).toBe('BAD_ARGUMENT');
  expect([parsed.error.message, ...parsed.error.details].join('\n')).toMatch(/--seed/);
  expect(result.stderr).toMatch(/--seed/);
});

it('a usage mistake under --json is JSON too; without --json stdout stays empty', async () => {
  const json = await cli(['gate', '--reward', 'm:f', '--answer', '1', '--json', '--no-such-flag']);
  expect(json.code).toBe(2);
  expect((JSON.parse(json.stdout) as { error: { message: string } }).error.message).toMatch(/no-such-flag/);
  const plain = await cli(['gate', '--reward', 'm:f', '--answer', '1', '--no-such-flag']);
  expect(plain.code).toBe(2);
  expect(plain.stdout).toBe('');
});

it('every error under --json has all four fields: a verifier with a syntax error gets a suggestion, a usage mistake a null one', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'gatekept-json-errors-'));
  try {
    await writeFile(path.join(dir, 'broken.py'), 'def reward(completion, answer:\n    return 1.0\n');
    const python = testPython('verifiers-v1');
    const syntax = await cli(['gate', '--reward', path.join(dir, 'broken.py:reward'), '--answer', '42', '--json', '--python', python, '--sandbox', 'none']);
    expect(syntax.code).toBe(2);
    const error = (JSON.parse(syntax.stdout) as { error: Record<string, unknown> }).error;
    expect(Object.keys(error).sort()).toEqual(['code', 'details', 'message', 'suggestion']);
    expect(error.code).toBe('VERIFIER_IMPORT_FAILED');
    expect(error.suggestion).toMatch(/--python/);
    const usage = await cli(['gate', '--reward', 'm:f', '--answer', '1', '--json', '--no-such-flag']);
    expect((JSON.parse(usage.stdout) as { error: Record<string, unknown> }).error).toHaveProperty('suggestion', null);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 120_000);
