/**
 * Verifiers written by someone who knows how gatekept audits them, run under
 * the bubblewrap sandbox through the real CLI. Each case must be REJECTed or
 * contained: no secret of the caller readable, nothing sent over the
 * network, nothing written outside the worker's working directory, nothing
 * left running, and nothing shipped that was not audited.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../src/paths.js';
import { openSandbox } from '../src/runtime/sandbox.js';
import { killAll, leftoverProcesses, processesMarkedBy } from './support/processes.js';

const BIN = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');
const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';
const HAS_BWRAP = (await openSandbox('auto')).kind === 'bwrap';

let scratch: string;
let fixtures: string;
let outside: string;
let victim: string;
let policy: string;
let server: net.Server;
let port: number;
const received: string[] = [];

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-hostile-'));
  fixtures = path.join(scratch, 'fixtures');
  await cp(path.join(PACKAGE_ROOT, 'test', 'fixtures', 'hostile'), fixtures, { recursive: true });
  outside = path.join(scratch, 'outside');
  await mkdir(outside);
  victim = path.join(scratch, 'victim.txt');
  await writeFile(victim, 'original');
  policy = path.join(scratch, 'policy.toml');
  await writeFile(policy, '[timeouts]\ncall_ms = 2000\nimport_ms = 10000\ntotal_s = 300\n\n[limits]\nmemory_mb = 1024\n');
  server = net.createServer((socket) => {
    socket.on('data', (chunk) => received.push(chunk.toString('utf8')));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as net.AddressInfo).port;
  await writeFile(path.join(fixtures, 'hostile_config.json'), JSON.stringify({ port, outside, victim }));
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await rm(scratch, { recursive: true, force: true });
});

beforeEach(() => {
  received.length = 0;
});

interface Run {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
  tmp: string;
  canary: string;
}

function secrets(canary: string): Record<string, string> {
  return { AWS_SECRET_ACCESS_KEY: canary, OPENAI_API_KEY: canary, HF_TOKEN: canary };
}

async function gate(fixture: string, extra: readonly string[] = [], sandbox: 'bwrap' | 'none' = 'bwrap'): Promise<Run> {
  const tmp = await mkdtemp(path.join(scratch, 'run-'));
  const canary = `canary-${randomUUID()}`;
  const run = await execa(
    process.execPath,
    [
      BIN,
      'gate',
      '--reward',
      `${path.join(fixtures, fixture)}.py:reward`,
      '--answer',
      '42',
      '--python',
      PYTHON,
      '--policy',
      policy,
      '--sandbox',
      sandbox,
      ...extra,
    ],
    { cwd: PACKAGE_ROOT, reject: false, stdin: 'ignore', env: { TMPDIR: tmp, FORCE_COLOR: '0', ...secrets(canary) } },
  );
  return { exitCode: run.exitCode, stdout: run.stdout, stderr: run.stderr, tmp, canary };
}

/** What holds for every hostile verifier, whatever the decision. */
async function expectContained(run: Run): Promise<void> {
  const leftovers = await leftoverProcesses(run.tmp);
  killAll(leftovers);
  expect(leftovers, 'processes left behind').toEqual([]);
  expect(run.stdout).not.toContain(run.canary);
  expect(run.stderr).not.toContain(run.canary);
  expect(run.stdout).not.toMatch(/canary-/);
  // A moment for anything in flight to arrive.
  await sleep(100);
  expect(received, 'data sent to the loopback listener').toEqual([]);
  expect(await readdir(outside), 'files written outside the workdir').toEqual([]);
  expect(await readFile(victim, 'utf8')).toBe('original');
  expect(
    (await readdir(run.tmp)).filter((name) => name.startsWith('gatekept-') || name.startsWith('run-')),
    'working directories left',
  ).toEqual([]);
}

describe.skipIf(!HAS_BWRAP)('hostile verifiers under bubblewrap', () => {
  it('credentials: /proc/<pid>/environ through a dir fd and /proc/<pid>/mem show no secret, and nothing leaves', async () => {
    const run = await gate('credentials', ['--json']);
    expect(run.exitCode, run.stderr).toBeLessThanOrEqual(1);
    expect(run.stdout).not.toMatch(/FOUND/);
    await expectContained(run);
  });

  it('bookkeeping: a harness patched from inside and a hook switched off still write nothing outside and reach no network', async () => {
    const run = await gate('bookkeeping');
    expect(run.exitCode, run.stderr).toBeLessThanOrEqual(1);
    await expectContained(run);
  });

  it('sneaky writes: dir_fd, mkfifo, mknod, hard links and profile hooks change nothing outside', async () => {
    const run = await gate('sneaky_writes');
    expect(run.exitCode, run.stderr).toBeLessThanOrEqual(1);
    await expectContained(run);
  });

  it('daemons: setsid double forks and children from __del__ do not outlive the audit', async () => {
    const run = await gate('daemons', ['--json']);
    expect(run.exitCode, run.stderr).toBe(0);
    const record = JSON.parse(run.stdout) as { side_effects: { kind: string }[] };
    expect(record.side_effects.map((effect) => effect.kind)).toContain('process');
    await expectContained(run);
  });

  it('supervisor: the process that talks to gatekept cannot be read, written or traced from the verifier', async () => {
    const run = await gate('supervisor_reach');
    expect(run.stdout).toMatch(/^decision: PASS$/m);
    expect(run.exitCode, run.stderr).toBe(0);
    await expectContained(run);
  });

  it('buried_write: a home too large to check rejects rather than hides a write', async () => {
    const run = await gate('buried_write', ['--json']);
    expect(run.exitCode).toBe(1);
    expect(run.stdout).toMatch(/too many for gatekept to check/);
    await expectContained(run);
  });

  it.each(['forgery', 'forgery_spaced'])('%s: a supervisor message written by the verifier stops the audit', async (name) => {
    const run = await gate(name);
    expect(run.exitCode).toBe(3);
    expect(run.stderr).toMatch(/broke gatekept's reply protocol/);
    expect(run.stdout).not.toMatch(/PASS/);
    await expectContained(run);
  });

  it('daemons: nothing keeps running after gatekept itself is SIGKILLed', async () => {
    const tmp = await mkdtemp(path.join(scratch, 'killed-'));
    const child = execa(
      process.execPath,
      [BIN, 'gate', '--reward', `${path.join(fixtures, 'daemons')}.py:reward`, '--answer', '42', '--python', PYTHON, '--sandbox', 'bwrap'],
      { cwd: PACKAGE_ROOT, reject: false, stdin: 'ignore', env: { TMPDIR: tmp } },
    );
    // Wait until the verifier has left a sleeper (a process under the run's sandbox beyond bwrap and the worker).
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline && (await processesMarkedBy(tmp)).length < 4) await sleep(20);
    child.kill('SIGKILL');
    await child;
    const leftovers = await leftoverProcesses(tmp, 5000);
    killAll(leftovers);
    expect(leftovers).toEqual([]);
  });

  it('resource limits: a verifier cannot raise its own memory limit and allocate past it', async () => {
    const run = await gate('rlimit', ['--json']);
    expect(run.stdout).not.toMatch(/RAISED-LIMIT/);
    expect(run.exitCode, run.stderr).toBe(0);
    await expectContained(run);
  });

  it('audit-aware: a verifier strict only under audit finds no tell and is rejected', async () => {
    const run = await gate('audit_aware');
    expect(run.stdout).toMatch(/^decision: REJECT$/m);
    expect(run.exitCode).toBe(1);
    await expectContained(run);
  });

  it('stateful: a reward that depends on earlier calls is not a function of its inputs', async () => {
    const run = await gate('stateful');
    expect(run.stdout).toMatch(/^decision: REJECT$/m);
    expect(run.stdout).toMatch(/not a function of its inputs: \d+ of \d+ calls scored again/);
    expect(run.exitCode).toBe(1);
    await expectContained(run);
  });

  it('terminal: escape sequences in exception text are shown escaped, never sent to the terminal', async () => {
    const run = await gate('ansi');
    for (const raw of ['\u001b', '\r', '\u202e']) expect(run.stdout.includes(raw), JSON.stringify(raw)).toBe(false);
    expect(run.stderr.includes('\u001b[2J')).toBe(false);
    expect(run.stdout).toMatch(/^decision: REJECT$/m);
    expect(run.exitCode).toBe(1);
    // The record keeps the text, escaped.
    const json = await gate('ansi', ['--json']);
    const errors = JSON.stringify((JSON.parse(json.stdout) as { errors: unknown }).errors);
    expect(errors).toContain('\\\\x1b[2J');
    expect(errors).not.toMatch(/\\u001b/);
  });

  it('staging: what the verifier plants beside --out is never emitted, and nothing is written outside --out', async () => {
    const parent = await mkdtemp(path.join(scratch, 'pack-'));
    const out = path.join(parent, 'out');
    const source = (await readFile(path.join(fixtures, 'staging.py'), 'utf8')).replace('CONFIG = {}', `CONFIG = ${JSON.stringify({ out, outside })}`);
    const verifier = path.join(parent, 'staging_verifier.py');
    await writeFile(verifier, source);
    const seed = path.join(parent, 'seed.json');
    await writeFile(
      seed,
      JSON.stringify({
        name: 'hostile-staging',
        description: 'Sums.',
        task: 'arith',
        dataset: { generator: { count: 8, operands: { min: 1, max: 99 }, operators: ['+'], seed: 1 } },
        answer_format: 'boxed',
        system_prompt: 'Give the sum inside \\boxed{}.',
        verifier: { file: verifier, function: 'reward' },
      }),
    );
    const tmp = await mkdtemp(path.join(scratch, 'run-'));
    const run = await execa(process.execPath, [BIN, 'pack', '--seed', seed, '--out', out, '--python', PYTHON, '--sandbox', 'bwrap', '--workers', '1'], {
      cwd: PACKAGE_ROOT,
      reject: false,
      stdin: 'ignore',
      env: { TMPDIR: tmp, FORCE_COLOR: '0' },
    });
    expect(run.exitCode, run.stderr).toBe(0);
    expect(existsSync(path.join(out, 'planted.txt'))).toBe(false);
    expect((await readdir(path.join(out, 'verifiers'), { withFileTypes: true })).every((entry) => entry.isDirectory())).toBe(true);
    expect((await readdir(parent)).sort()).toEqual(['out', 'seed.json', 'staging_verifier.py']);
    expect(await readdir(outside)).toEqual([]);
    const leftovers = await leftoverProcesses(tmp);
    killAll(leftovers);
    expect(leftovers).toEqual([]);
  });
});

describe('hostile verifiers without the sandbox', () => {
  it('daemons: the supervisor adopts setsid double forks and children from __del__, and none outlives the audit', async () => {
    const run = await gate('daemons', ['--json'], 'none');
    expect(run.exitCode, run.stderr).toBe(0);
    const record = JSON.parse(run.stdout) as { side_effects: { kind: string; examples: string[] }[] };
    expect(record.side_effects.map((effect) => effect.kind)).toContain('process');
    // The setsid double fork's orphan is nobody's child but the supervisor's.
    const leftovers = await leftoverProcesses(run.tmp);
    killAll(leftovers);
    expect(leftovers, 'processes left behind').toEqual([]);
  });

  it('sub-directories: files a call leaves in a directory the import made are found by gatekept and reject', async () => {
    const run = await gate('subdir_writes', ['--json'], 'none');
    const record = JSON.parse(run.stdout) as { decision: string; side_effects: { kind: string; examples: string[] }[] };
    expect(record.decision).toBe('REJECT');
    expect(record.side_effects.find((effect) => effect.kind === 'file_created')?.examples.join('\n')).toMatch(
      /cache\/left-\d+ \(found by gatekept after the calls\)/,
    );
    expect(run.exitCode).toBe(1);
  });
});
