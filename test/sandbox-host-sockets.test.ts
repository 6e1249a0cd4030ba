/**
 * Host services behind unix sockets in the directories the sandbox binds, as
 * an attacker would place them: names no parser reads right (a newline,
 * bytes that are not UTF-8), a socket hard-linked in from elsewhere, one
 * bound after the workers started, and one beside a verifier kept in a
 * dot-directory that the sandbox covers and binds again beneath. The
 * listeners are the test's own; the verifier knocks on every `*.sock` beside
 * it on every call, and nothing may arrive.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFile, link, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../src/paths.js';
import { openSandbox } from '../src/runtime/sandbox.js';

const BIN = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');
const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';
const FIXTURES = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'host-sockets');
const SANDBOX = await openSandbox('auto');
// Without overlays the sandbox refuses unix sockets altogether: nothing may arrive either way.
const HAS_BWRAP = SANDBOX.kind === 'bwrap';

let scratch: string;
let policy: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-host-sockets-'));
  policy = path.join(scratch, 'policy.toml');
  // Each call sleeps a little in the verifier, so the audit outlasts the late listener's delay.
  await writeFile(policy, '[timeouts]\ncall_ms = 2000\nimport_ms = 10000\ntotal_s = 300\n');
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

interface Listener {
  process: ChildProcess;
  /** Hex names of the paths connections came in on. */
  connected: string[];
  ready: Promise<void>;
}

function listen(paths: readonly Buffer[], lateAfterS = 0): Listener {
  const child = spawn(PYTHON, [path.join(FIXTURES, 'listen.py'), String(lateAfterS), ...paths.map((entry) => entry.toString('hex'))], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const connected: string[] = [];
  const ready = new Promise<void>((resolve, reject) => {
    child.on('error', reject);
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      for (const line of chunk.split('\n')) {
        if (line === 'ready') resolve();
        if (line.startsWith('CONNECT ')) connected.push(line.slice('CONNECT '.length));
      }
    });
  });
  return { process: child, connected, ready };
}

async function gate(
  verifier: string,
  cwd: string,
  env: Record<string, string> = {},
): Promise<{ exitCode: number | undefined; stdout: string; stderr: string }> {
  const tmp = await mkdtemp(path.join(scratch, 'tmp-'));
  const run = await execa(
    process.execPath,
    [
      BIN,
      'gate',
      '--reward',
      `${verifier}:reward`,
      '--answer',
      '42',
      '--python',
      env.PYTHON_PATH ?? PYTHON,
      '--policy',
      policy,
      '--sandbox',
      'bwrap',
      '--json',
    ],
    { cwd, reject: false, stdin: 'ignore', env: { TMPDIR: tmp, FORCE_COLOR: '0', ...env } },
  );
  return { exitCode: run.exitCode, stdout: run.stdout, stderr: run.stderr };
}

const named = (dir: string, name: Buffer): Buffer => Buffer.concat([Buffer.from(`${dir}/`), name]);
const hex = (entry: Buffer): string => entry.toString('hex');

describe.skipIf(!HAS_BWRAP)('no host unix socket is reachable from the sandbox, whatever its name, time or link', () => {
  it('names with a newline or bytes that are not UTF-8, a hard link from outside, and a socket bound after launch', async () => {
    const dir = path.join(scratch, 'verifier');
    const outside = path.join(scratch, 'outside');
    await mkdir(dir);
    await mkdir(outside);
    await copyFile(path.join(FIXTURES, 'reach.py'), path.join(dir, 'reach.py'));
    const newline = named(dir, Buffer.from('svc\nfake.sock'));
    const binary = named(dir, Buffer.from([0x73, 0x76, 0x63, 0xff, 0xfe, 0x2e, 0x73, 0x6f, 0x63, 0x6b]));
    const origin = Buffer.from(path.join(outside, 'origin.sock'));
    const late = Buffer.from(path.join(dir, 'late.sock'));
    const listener = listen([newline, binary, origin, late], 1);
    try {
      await listener.ready;
      await link(origin, path.join(dir, 'linked.sock'));
      const run = await gate(path.join(dir, 'reach.py'), PACKAGE_ROOT);
      await sleep(100);
      expect(run.exitCode, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout).environment.isolation).toBe('bwrap');
      const reached = new Set(listener.connected);
      expect({ newline: reached.has(hex(newline)), binary: reached.has(hex(binary)), linked: reached.has(hex(origin)), late: reached.has(hex(late)) }).toEqual({
        newline: false,
        binary: false,
        linked: false,
        late: false,
      });
    } finally {
      listener.process.kill('SIGKILL');
    }
  });

  it('where overlays cannot be made (no unshare or nsenter), the verifier gets no unix socket, and every run says so', async () => {
    const dir = path.join(scratch, 'no-overlays');
    const bin = path.join(scratch, 'bin-bwrap-only');
    await mkdir(dir);
    await mkdir(bin);
    await copyFile(path.join(FIXTURES, 'reach.py'), path.join(dir, 'reach.py'));
    const bwrap = (await execa('sh', ['-c', 'command -v bwrap'])).stdout.trim();
    await symlink(bwrap, path.join(bin, 'bwrap'));
    const agent = Buffer.from(path.join(dir, 'agent.sock'));
    const listener = listen([agent]);
    try {
      await listener.ready;
      const python = (await execa('sh', ['-c', `command -v "${PYTHON}"`])).stdout.trim();
      const run = await gate(path.join(dir, 'reach.py'), PACKAGE_ROOT, { PATH: bin, PYTHON_PATH: python });
      await sleep(100);
      expect(run.exitCode, run.stderr).toBe(0);
      expect(run.stderr).toMatch(/cannot show directories through overlays here .* no unix socket/);
      expect(listener.connected).toEqual([]);
    } finally {
      listener.process.kill('SIGKILL');
    }
  });

  it('a socket beside a verifier kept in a dot-directory that is covered and bound again beneath', async () => {
    const root = path.join(scratch, 'project');
    const dir = path.join(root, '.config', 'x');
    await mkdir(dir, { recursive: true });
    await copyFile(path.join(FIXTURES, 'reach.py'), path.join(dir, 'reach.py'));
    const agent = Buffer.from(path.join(dir, 'agent.sock'));
    const listener = listen([agent]);
    try {
      await listener.ready;
      // Run from the project, so that its `.config` is covered and the verifier's directory bound again.
      const run = await gate(path.join(dir, 'reach.py'), root);
      await sleep(100);
      expect(run.exitCode, run.stderr).toBe(0);
      expect(listener.connected).toEqual([]);
    } finally {
      listener.process.kill('SIGKILL');
    }
  });
});
