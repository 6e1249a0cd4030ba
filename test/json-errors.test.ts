/**
 * A run asked for JSON that ends before any record (bad input, exit 2) still
 * prints JSON on stdout: a script that reads stdout learns why, not nothing.
 */
import { expect, it } from 'vitest';
import { run } from '../src/cli/run.js';
import type { Io } from '../src/cli/io.js';

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
