/**
 * The command's last line: a bound on the wall clock kept by Node, which
 * kills every process group the command started, whatever they do, and
 * ends it as could not audit; groups of another command running beside it
 * in the same process are left alone.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICY } from '../src/audit/policy.js';
import { GatekeptError } from '../src/errors.js';
import { registerGroup, releaseGroup } from '../src/runtime/cleanup.js';
import { hardBoundMs, withinHardBound } from '../src/runtime/hard-bound.js';

/** A process that ignores SIGTERM and never ends, in a group of its own, registered as the runtime registers its workers. */
function stubborn(): { pid: number; exited: Promise<string | null> } {
  const child = spawn('/bin/sh', ['-c', 'trap "" TERM INT HUP; while :; do sleep 1; done'], { detached: true, stdio: 'ignore' });
  registerGroup(child.pid!);
  const exited = new Promise<string | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
  void exited.then(() => releaseGroup(child.pid!));
  return { pid: child.pid!, exited };
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('the hard bound on a command', () => {
  it('kills what the command started and fails it as could not audit; a command beside it keeps its processes', async () => {
    const bystander = await withinHardBound(60_000, 'the other command', async () => stubborn());
    let started: { pid: number; exited: Promise<string | null> } | null = null;
    const outcome = await withinHardBound(300, 'the gate', async () => {
      started = stubborn();
      // A command whose processes never answer: only the bound ends it.
      await new Promise(() => undefined);
    }).catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(GatekeptError);
    expect((outcome as GatekeptError).code).toBe('HARNESS_FAILED');
    expect((outcome as GatekeptError).exitCode).toBe(3);
    expect((outcome as GatekeptError).message).toMatch(/the gate did not end within its hard bound/);
    expect(await started!.exited).toBe('SIGKILL');
    expect(alive(bystander.pid)).toBe(true);
    process.kill(-bystander.pid, 'SIGKILL');
    await bystander.exited;
  });

  it('is derived from the policy: the audit deadline, the import twice over, a call and slack', () => {
    const policy = { ...DEFAULT_POLICY, timeouts: { ...DEFAULT_POLICY.timeouts, totalS: 100, importMs: 1000, callMs: 2000 } };
    expect(hardBoundMs(policy)).toBe(100_000 + 2 * 4000 + 2000 + 30_000);
  });
});
