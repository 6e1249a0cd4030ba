/**
 * Without the sandbox (--sandbox none) gatekept still keeps the promises it
 * can: nothing the verifier or the environment started outlives the audit,
 * however it detached (a new session, a double fork, a thread group whose
 * leader thread has exited). Each fixture writes to a beacon file for as
 * long as it lives; the beacon must stop growing once the audit is over.
 */
import { appendFile, cp, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../src/paths.js';
import { testPython } from './support/test-python.js';

const BIN = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');
const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';
const FIXTURES = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'unsandboxed');

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-unsandboxed-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function size(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch {
    return 0;
  }
}

/** Whether anything still writes to the beacon, a while after the run. */
async function stillWriting(beacon: string): Promise<boolean> {
  const before = await size(beacon);
  await sleep(600);
  return (await size(beacon)) !== before;
}

describe('--sandbox none', () => {
  it('a process whose leader thread exited while another thread runs does not outlive the gate', async () => {
    const dir = await mkdtemp(path.join(scratch, 'gate-'));
    await cp(path.join(FIXTURES, 'leaderless.py'), path.join(dir, 'leaderless.py'));
    const beacon = path.join(dir, 'beacon');
    await writeFile(path.join(dir, 'beacon_path.txt'), beacon);
    const run = await execa(
      process.execPath,
      [BIN, 'gate', '--reward', `${path.join(dir, 'leaderless.py')}:reward`, '--answer', '42', '--python', PYTHON, '--sandbox', 'none', '--json'],
      {
        reject: false,
        stdin: 'ignore',
        env: { FORCE_COLOR: '0' },
      },
    );
    expect(run.exitCode, run.stderr).toBeLessThanOrEqual(1);
    // The thread did run: the beacon exists.
    expect(await size(beacon)).toBeGreaterThan(0);
    expect(await stillWriting(beacon)).toBe(false);
  });

  it('a daemon an environment starts at import does not outlive audit --env, loader included', async () => {
    const dir = path.join(await mkdtemp(path.join(scratch, 'env-')), 'v0-sound');
    await cp(path.join(PACKAGE_ROOT, 'test', 'fixtures', 'envs', 'v0-sound'), dir, { recursive: true });
    await appendFile(path.join(dir, 'v0_sound.py'), `\n${await readFile(path.join(FIXTURES, 'daemon_env.py'), 'utf8')}`);
    const beacon = path.join(dir, 'beacon');
    await writeFile(path.join(dir, 'beacon_path.txt'), beacon);
    const run = await execa(
      process.execPath,
      // One worker: each imports verifiers and the environment (daemon included), and one shows it as well as two.
      [BIN, 'audit', '--env', dir, '--python', testPython('verifiers-v0'), '--sandbox', 'none', '--rows', '1', '--workers', '1', '--json'],
      { reject: false, stdin: 'ignore', env: { FORCE_COLOR: '0' }, timeout: 500_000 },
    );
    expect(run.exitCode, run.stderr).not.toBeNull();
    expect(await size(beacon)).toBeGreaterThan(0);
    expect(await stillWriting(beacon)).toBe(false);
    // Loading and gating the environment twice over without the sandbox's speed-ups: minutes on a busy machine.
  }, 600_000);
});
