import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EvalRequest, VerifierSession } from '../src/calls.js';
import { openVerifierSession } from '../src/runtime/python-session.js';

/**
 * The worker's call timers (python/gatekept_isolation.py, _arm_call): set for
 * the call timeout plus a slack, and kept for the calls that start within
 * that slack, instead of being set anew by two syscalls per call; set anew
 * when one fired or the verifier set one of its own; and a call past the
 * timeout is a timeout whether or not they fired.
 */

const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'gatekept-timers-test-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const VERIFIER = `
import os
import signal
import time


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"] if isinstance(completion, list) else completion
    if text == "real":
        return signal.getitimer(signal.ITIMER_REAL)[0]
    if text == "cpu":
        return signal.getitimer(signal.ITIMER_PROF)[0]
    if text == "cancel":
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        return 1.0
    if text == "alarm":
        signal.alarm(0)
        return 1.0
    if text == "pid":
        return float(os.getpid())
    if text == "sleep":
        time.sleep(float(answer))
        return 1.0
    if text == "wait":
        end = time.monotonic() + 30
        while time.monotonic() < end:
            time.sleep(0.01)
        return 1.0
    return 0.0
`;

async function withSession<T>(callTimeoutMs: number, body: (session: VerifierSession) => Promise<T>): Promise<T> {
  const file = path.join(dir, `timers_${callTimeoutMs}.py`);
  await writeFile(file, VERIFIER);
  const session = await openVerifierSession({
    python: PYTHON,
    target: { kind: 'file', path: file, fn: 'reward' },
    pythonpath: [],
    completionFormat: 'messages',
    callTimeoutMs,
    importTimeoutMs: 10_000,
    memoryMb: 2048,
  });
  try {
    return await body(session);
  } finally {
    await session.close();
  }
}

const req = (completion: string, answer = '1'): EvalRequest => ({ completion, answer, prompt: 'q', info: {} });

describe('call timers', () => {
  it('are set for the call timeout plus a slack, so the calls that start within it keep them', async () => {
    await withSession(2000, async (session) => {
      const results = await session.evaluate([req('real'), req('cpu'), req('real'), req('cpu')]);
      for (const result of results) {
        expect(result.status).toBe('ok');
        // Set anew per call, a timer would have less than the call timeout left.
        expect(result.reward).toBeGreaterThan(2);
        // The slack is at most 50 ms; the kernel may round a CPU-time timer up by a tick.
        expect(result.reward).toBeLessThanOrEqual(2.06);
      }
    });
  });

  it('are set anew after the verifier cancelled them through the signal module, so its next call is still cut in the worker', async () => {
    await withSession(300, async (session) => {
      for (const cancel of ['cancel', 'alarm']) {
        const [before, cancelled, waited, after] = await session.evaluate([req('pid'), req(cancel), req('wait'), req('pid')]);
        expect(cancelled).toMatchObject({ status: 'ok', reward: 1 });
        expect(waited).toMatchObject({ status: 'timeout', error: { type: 'Timeout', message: 'the verifier did not return within 300 ms' } });
        // The same worker: the call was cut by its own timers, not by a kill from outside.
        expect(after?.reward).toBe(before?.reward);
      }
    });
  });

  it('count a call that ran past the timeout as a timeout, whether or not they fired before it returned', async () => {
    await withSession(320, async (session) => {
      // 320 ms is set as 330 ms: a sleep of 325 ms returns before they fire.
      const [short, past, after] = await session.evaluate([req('sleep', '0.2'), req('sleep', '0.325'), req('x')]);
      expect(short).toMatchObject({ status: 'ok', reward: 1 });
      expect(past).toMatchObject({ status: 'timeout', reward: null, error: { type: 'Timeout' } });
      expect(after).toMatchObject({ status: 'ok', reward: 0 });
    });
  });
});
