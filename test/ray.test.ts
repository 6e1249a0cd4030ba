/**
 * --ray on a real Ray head of the test's own (loopback, two CPUs): the
 * records of scan and gate --dataset equal a local run's but for timing and
 * the executor, an actor killed mid-run costs nothing but a report, and no
 * actor outlives the run.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../src/paths.js';
import { scan } from '../src/scan/scan.js';
import { cli } from './support/cli.js';
import { prepareRayPython, RAY_LOOPBACK_ENV, type RayHead, startRayHead } from './support/ray-head.js';

const run = promisify(execFile);
const rayPython = prepareRayPython();
const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';
const FIXTURES = path.join(PACKAGE_ROOT, 'test', 'fixtures');
const TRL = path.join(FIXTURES, 'scan', 'trl-rollouts.jsonl');
const FIELDS = 'completion=response,answer=ground_truth';

/** A record as JSON, less what may differ between two runs of the same input. */
function comparable(stdout: string): string {
  const { timing: _timing, executor: _executor, ...rest } = JSON.parse(stdout) as Record<string, unknown>;
  return JSON.stringify(rest);
}

/** The gatekept actors still alive, once the cluster has had a few seconds to end those being killed. */
async function liveActors(address: string, attempts = 5): Promise<string[]> {
  let names: string[] = [];
  for (let attempt = 0; attempt < attempts; attempt += 1) {
    const { stdout } = await run(rayPython!, [path.join(FIXTURES, 'ray', 'named-actors.py'), address], { env: { ...process.env, ...RAY_LOOPBACK_ENV } });
    names = JSON.parse(stdout.trim().split('\n').pop()!) as string[];
    if (names.length === 0 || attempt === attempts - 1) return names;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  return names;
}

describe.skipIf(rayPython === null)('--ray', () => {
  let head: RayHead;
  let scratch: string;
  const env = { ...RAY_LOOPBACK_ENV };

  beforeAll(async () => {
    head = await startRayHead(rayPython!);
    scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-ray-'));
  });

  afterAll(async () => {
    await head?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('scans and gates a dataset with the records of a local run, and leaves no actor behind', async () => {
    const scanArgs = ['scan', '--results', TRL, '--reward', path.join(FIXTURES, 'scan', 'gameable.py:reward'), '--field', FIELDS, '--python', PYTHON, '--json'];
    const rows = path.join(scratch, 'rows.jsonl');
    await writeFile(rows, '{"question": "What is 6 * 7?", "answer": "42"}\n{"question": "What is 100 - 1?", "answer": "99"}\n');
    const gateArgs = [
      'gate',
      '--reward',
      path.join(PACKAGE_ROOT, 'examples', 'verifiers', 'substring.py:reward'),
      '--dataset',
      rows,
      '--python',
      PYTHON,
      '--json',
    ];

    const [localScan, localGate] = [await cli([...scanArgs, '--workers', '2'], { env }), await cli([...gateArgs, '--workers', '2'], { env })];
    const rayScan = await cli([...scanArgs, '--workers', '2', '--ray', head.address], { env });
    const rayGate = await cli([...gateArgs, '--workers', '2', '--ray', head.address], { env });

    expect(rayScan.stderr).not.toMatch(/error/);
    expect(rayScan.exitCode).toBe(localScan.exitCode);
    expect(comparable(rayScan.stdout)).toBe(comparable(localScan.stdout));
    expect(JSON.parse(rayScan.stdout).executor).toMatchObject({ kind: 'ray', address: head.address, actors: 2, nodes: 1, lost: [] });
    expect(JSON.parse(localScan.stdout).executor).toBeUndefined();

    expect(rayGate.exitCode).toBe(localGate.exitCode);
    expect(comparable(rayGate.stdout)).toBe(comparable(localGate.stdout));
    expect(JSON.parse(rayGate.stdout).executor).toMatchObject({ kind: 'ray', lost: [] });

    expect(await liveActors(head.address)).toEqual([]);
  });

  it('runs the calls of a killed actor again on another and reports the loss', async () => {
    process.env.RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER = RAY_LOOPBACK_ENV.RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER;
    const options = { results: TRL, reward: path.join(FIXTURES, 'ray', 'slow-gameable.py:reward'), fields: [FIELDS], python: PYTHON };
    const local = await scan({ ...options, workers: 2 });
    // One actor, killed once it has been up for a moment: its worker is mid-batch.
    const killer = run(rayPython!, [path.join(FIXTURES, 'ray', 'kill-actor.py'), head.address, '2.5'], { env: { ...process.env, ...RAY_LOOPBACK_ENV } });
    const told: string[] = [];
    const remote = await scan({ ...options, workers: 1, ray: { address: head.address }, onActorLost: (actor) => told.push(actor) });
    const { stdout } = await killer;
    const killed = stdout.trim().split('\n').pop()!;

    const { timing: _a, executor: _b, ...localRest } = local.record;
    const { timing: _c, executor, ...remoteRest } = remote.record;
    expect(remoteRest).toEqual(localRest);
    expect(executor?.lost.map((loss) => loss.actor)).toEqual([killed]);
    expect(told).toEqual([killed]);
    expect(await liveActors(head.address)).toEqual([]);
  });

  it('leaves no actor behind when interrupted', async () => {
    const running = cli(
      [
        'scan',
        '--results',
        TRL,
        '--reward',
        path.join(FIXTURES, 'ray', 'slow-gameable.py:reward'),
        '--field',
        FIELDS,
        '--python',
        PYTHON,
        '--workers',
        '1',
        '--ray',
        head.address,
      ],
      { env },
    );
    const deadline = Date.now() + 60_000;
    let seen: string[] = [];
    while (seen.length === 0 && Date.now() < deadline) seen = await liveActors(head.address, 1);
    expect(seen).toHaveLength(1);
    running.kill('SIGINT');
    const result = await running;
    expect(result.exitCode).toBe(130);
    expect(await liveActors(head.address)).toEqual([]);
  });

  it('says what to fix, and exits 3, when no cluster answers', async () => {
    const result = await cli(
      ['scan', '--results', TRL, '--reward', path.join(FIXTURES, 'scan', 'gameable.py:reward'), '--field', FIELDS, '--python', PYTHON, '--ray', '127.0.0.1:1'],
      { env: { ...env, GATEKEPT_RAY_CONNECT_TIMEOUT_MS: '3000' } },
    );
    expect(result.exitCode).toBe(3);
    expect(result.stderr).toMatch(/cannot use the Ray cluster at 127\.0\.0\.1:1/);
    expect(result.stderr).toMatch(/ray status --address 127\.0\.0\.1:1/);
  });
});

describe('--ray without Ray', () => {
  it('names the virtualenv to build', async () => {
    const result = await cli([
      'scan',
      '--results',
      TRL,
      '--reward',
      path.join(FIXTURES, 'scan', 'gameable.py:reward'),
      '--field',
      FIELDS,
      '--ray',
      '--ray-python',
      '/nonexistent/bin/python',
    ]);
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/bash scripts\/setup-python-env\.sh ray/);
  });
});
