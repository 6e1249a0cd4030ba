/**
 * The command line's compiled code kept between runs: written by the first
 * run of a command, accepted (so not written again) by the next, replaced
 * when it is damaged, kept apart per command, and never a reason for the
 * command to fail.
 */
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cli } from './support/cli.js';
const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-code-cache-test-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

function cliCaching(cacheHome: string, args: readonly string[]) {
  // No inherited V8 flags: code compiled under other flags is rejected, which is not what is tested here.
  return cli(args, { env: { XDG_CACHE_HOME: cacheHome, NODE_OPTIONS: '' } });
}

async function entries(cacheHome: string): Promise<string[]> {
  return (await readdir(path.join(cacheHome, 'gatekept', 'v8')).catch(() => [])).sort();
}

it('writes the code once per command, reuses it, and replaces a damaged entry', async () => {
  const home = path.join(scratch, 'cache');
  const first = await cliCaching(home, ['--version']);
  expect(first.exitCode).toBe(0);
  const [entry, ...others] = await entries(home);
  expect(others).toEqual([]);
  expect(entry).toMatch(/^[0-9a-f]{32}-other\.bin$/);
  const file = path.join(home, 'gatekept', 'v8', entry!);
  const written = await stat(file);
  expect(written.size).toBeGreaterThan(10_000);

  // Accepted: a rejected entry would be written again, as a new file renamed into place.
  const second = await cliCaching(home, ['--help']);
  expect(second.exitCode).toBe(0);
  expect(second.stdout).toContain('gate');
  const reused = await stat(file);
  expect([reused.ino, reused.mtimeMs]).toEqual([written.ino, written.mtimeMs]);

  await writeFile(file, 'not compiled code');
  const damaged = await cliCaching(home, ['--version']);
  expect(damaged.exitCode).toBe(0);
  expect(damaged.stdout.trim()).toBe(first.stdout.trim());
  expect((await readFile(file)).length).toBeGreaterThan(10_000);

  // A command keeps its own entry, holding the functions it compiled.
  const gate = await cliCaching(home, ['gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--python', PYTHON, '--json']);
  expect(gate.exitCode).toBe(0);
  expect(await entries(home)).toEqual([entry!.replace('-other', '-gate'), entry]);
}, 60_000);

it('runs when the cache cannot be written', async () => {
  // A file where the cache directory would go: nothing can be created under it.
  const blocked = path.join(scratch, 'blocked');
  await writeFile(blocked, '');
  const run = await cliCaching(blocked, ['--version']);
  expect(run.exitCode).toBe(0);
  expect(run.stderr).toBe('');
  expect(run.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
});
