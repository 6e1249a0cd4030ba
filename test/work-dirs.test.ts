/**
 * Working directories of verifier processes: neutral names (a sandbox's mount
 * table shows them), swept after a killed run only when they are marked ours.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';

let scratch: string;
const previous = process.env.TMPDIR;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-work-dirs-test-'));
  process.env.TMPDIR = scratch;
});

afterAll(async () => {
  if (previous === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = previous;
  await rm(scratch, { recursive: true, force: true });
});

it('names a working directory without gatekept, and sweeps only the leftovers of its own dead runs', async () => {
  // A pid that no longer exists: a child that has already exited.
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
  const ours = path.join(scratch, `run-${dead}-Abc123`);
  const theirs = path.join(scratch, `run-${dead}-Xyz789`);
  await mkdir(path.join(ours, 'home'), { recursive: true });
  await writeFile(path.join(ours, '.gatekept-work-dir'), '');
  await mkdir(theirs);
  await writeFile(path.join(theirs, 'notes.txt'), 'not ours');
  // Killed before it wrote its marker: holds only what ours hold.
  const unmarked = path.join(scratch, `run-${dead}-Unm4rk`);
  await mkdir(path.join(unmarked, 'home'), { recursive: true });
  // Killed while removing its own directory: the marker went first, the sandbox's scratch files remain.
  const halfRemoved = path.join(scratch, `run-${dead}-Half01`);
  await mkdir(path.join(halfRemoved, 'app'), { recursive: true });
  for (const name of ['empty', 'group', 'passwd', 'init-cmdline', 'seccomp.bpf', 'seccomp-nounix.bpf']) await writeFile(path.join(halfRemoved, name), '');
  const { makeWorkDir, workDirsSwept } = await import('../src/runtime/stale-dirs.js');
  const registry = new Set<string>();
  const dir = await makeWorkDir(registry);
  // The sweep runs alongside, so a worker's start does not wait on it.
  await workDirsSwept();
  expect(path.basename(dir)).toMatch(new RegExp(`^run-${process.pid}-[A-Za-z0-9]{6}$`));
  expect(path.basename(dir)).not.toMatch(/gatekept/i);
  expect(registry.has(dir)).toBe(true);
  expect((await readdir(dir)).sort()).toEqual(['.gatekept-work-dir', 'home', 'tmp']);
  expect(existsSync(ours)).toBe(false);
  expect(existsSync(unmarked)).toBe(false);
  expect(existsSync(halfRemoved)).toBe(false);
  expect(existsSync(theirs)).toBe(true);
});

it('tells a reused pid from the creator: a process younger than the directory did not make it', async () => {
  const { processStartedAfter, removeStaleDirs } = await import('../src/runtime/stale-dirs.js');
  const { spawn } = await import('node:child_process');
  const young = spawn('sleep', ['30'], { stdio: 'ignore' });
  try {
    const pid = young.pid!;
    expect(processStartedAfter(pid, Date.now() - 60_000)).toBe(true);
    expect(processStartedAfter(pid, Date.now() + 60_000)).toBe(false);
    // The test's parent started before any directory below was made: its entry stays.
    const kept = path.join(scratch, `run-${process.ppid}-Keep12`);
    await mkdir(kept);
    const removed = await removeStaleDirs(scratch, /^run-(\d+)-Keep12$/);
    expect(removed).toEqual([]);
    expect(existsSync(kept)).toBe(true);
  } finally {
    young.kill('SIGKILL');
  }
});
