/**
 * Ways out of the bubblewrap sandbox that the namespaces alone leave open:
 * host services behind unix sockets on the read-only filesystem, the rest of
 * a dot-directory that holds the interpreter's venv, files only their owner
 * reads (the sandbox's user is that owner when gatekept runs as root), and
 * bubblewrap's own command line. Each verifier raises "LEAKED ..." from its
 * reward when something got out, so the gate's record says what.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../src/paths.js';
import { PythonProcess } from '../src/runtime/python-process.js';
import { openSandbox } from '../src/runtime/sandbox.js';
import { seccompProgram } from '../src/runtime/seccomp.js';

const BIN = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');
const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';
const HAS_BWRAP = (await openSandbox('auto')).kind === 'bwrap';
const HAS_FILTER = seccompProgram() !== null;

let scratch: string;
let fixtures: string;
/** Where the test's unix sockets live: outside /tmp, which the sandbox replaces with its own. */
let sockets: string;
let policy: string;
let server: net.Server;
let datagrams: ChildProcess | null = null;
const received: string[] = [];

/** A directory the sandbox sees as it is on the host: /var/tmp, or beside the checkout. */
beforeAll(async () => {
  if (!HAS_BWRAP) return;
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-escape-'));
  fixtures = path.join(scratch, 'fixtures');
  await cp(path.join(PACKAGE_ROOT, 'test', 'fixtures', 'hostile'), fixtures, { recursive: true });
  policy = path.join(scratch, 'policy.toml');
  await writeFile(policy, '[timeouts]\ncall_ms = 2000\nimport_ms = 10000\ntotal_s = 300\n\n[limits]\nmemory_mb = 1024\n');
  // In the verifier's own directory, which the sandbox binds: the socket files are what must be covered.
  sockets = path.join(fixtures, 'sockets');
  await mkdir(sockets);
  const stream = path.join(sockets, 'stream.sock');
  const dgram = path.join(sockets, 'dgram.sock');
  server = net.createServer((socket) => {
    received.push('stream-connected');
    socket.on('data', (chunk) => received.push(chunk.toString('utf8')));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(stream, resolve));
  // Node has no unix datagram sockets: a small Python listener prints what arrives.
  datagrams = spawn(
    PYTHON,
    [
      '-u',
      '-c',
      'import socket,sys\ns=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)\ns.bind(sys.argv[1])\nprint("ready")\nwhile True:\n    print(s.recv(4096).decode("utf8","replace"))',
      dgram,
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const listener = datagrams;
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.stdout!.setEncoding('utf8');
    listener.stdout!.on('data', (chunk: string) => {
      for (const line of chunk.split('\n').filter(Boolean)) {
        if (line === 'ready') resolve();
        else received.push(line);
      }
    });
  });
  await writeFile(path.join(fixtures, 'hostile_config.json'), JSON.stringify({ stream, dgram }));
});

afterAll(async () => {
  if (!HAS_BWRAP) return;
  datagrams?.kill('SIGKILL');
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await rm(sockets, { recursive: true, force: true });
  await rm(scratch, { recursive: true, force: true });
});

beforeEach(() => {
  received.length = 0;
});

interface GateRun {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
}

async function gate(reward: string, options: { python?: string; env?: Record<string, string> } = {}): Promise<GateRun> {
  const tmp = await mkdtemp(path.join(scratch, 'run-'));
  const run = await execa(
    process.execPath,
    [BIN, 'gate', '--reward', `${reward}:reward`, '--answer', '42', '--python', options.python ?? PYTHON, '--policy', policy, '--sandbox', 'bwrap', '--json'],
    { cwd: PACKAGE_ROOT, reject: false, stdin: 'ignore', env: { TMPDIR: tmp, FORCE_COLOR: '0', ...options.env } },
  );
  return { exitCode: run.exitCode, stdout: run.stdout, stderr: run.stderr };
}

/** What the verifier said got out, from the exceptions in the gate's record. */
function leaks(run: GateRun): string[] {
  return [...new Set(run.stdout.match(/LEAKED [^"\\]*/g) ?? [])];
}

describe.skipIf(!HAS_BWRAP)('escapes from the bubblewrap sandbox', () => {
  it.skipIf(!HAS_FILTER)('unix sockets: host services on the read-only filesystem receive nothing, by socket, datagram pair or io_uring', async () => {
    const run = await gate(path.join(fixtures, 'unix_socket.py'));
    // A moment for anything in flight to arrive.
    await sleep(100);
    expect(received, 'delivered to the unix sockets outside').toEqual([]);
    expect(leaks(run)).toEqual([]);
    expect(run.stdout).toMatch(/"decision": ?"PASS"/);
    expect(run.exitCode, run.stderr).toBe(0);
  });

  it('asyncio and TCP still work under the filter', async () => {
    const run = await gate(path.join(fixtures, 'asyncio_tcp.py'));
    expect(run.stdout).not.toMatch(/BROKEN/);
    expect(run.stdout).toMatch(/"decision": ?"PASS"/);
    expect(run.exitCode, run.stderr).toBe(0);
  });

  it("owner-only files and process 1's command line: nothing readable, bubblewrap named nowhere", async () => {
    const run = await gate(path.join(fixtures, 'host_secrets.py'));
    expect(leaks(run)).toEqual([]);
    expect(run.stdout).toMatch(/"decision": ?"PASS"/);
    expect(run.exitCode, run.stderr).toBe(0);
  });

  it('a venv in ~/.cache: only the venv comes back, the rest of ~/.cache and the other dot-entries stay hidden', async () => {
    const home = await mkdtemp(path.join(scratch, 'home-'));
    const venv = path.join(home, '.cache', 'gatekept', 'venvs', 'x');
    await mkdir(path.dirname(venv), { recursive: true });
    await execa(PYTHON, ['-m', 'venv', '--without-pip', venv]);
    const plant = async (relative: string): Promise<void> => {
      await mkdir(path.dirname(path.join(home, relative)), { recursive: true });
      await writeFile(path.join(home, relative), 'secret');
    };
    for (const relative of ['.cache/huggingface/token', '.cache/gatekept/token', '.cache/gatekept/venvs/other/token', '.aws/credentials', '.netrc'])
      await plant(relative);
    // The verifier in the home itself, so the whole home is readable.
    for (const name of ['home_cache.py', '_hostile.py']) await cp(path.join(fixtures, name), path.join(home, name));
    const run = await gate(path.join(home, 'home_cache.py'), { python: path.join(venv, 'bin', 'python'), env: { HOME: home } });
    expect(leaks(run)).toEqual([]);
    expect(run.stdout).toMatch(/"decision": ?"PASS"/);
    expect(run.exitCode, run.stderr).toBe(0);
  });

  it.skipIf(!HAS_FILTER)('a bubblewrap or kernel that refuses the filter keeps the namespaces, and every run says what is missing', async () => {
    const real = (await execa('sh', ['-c', 'command -v bwrap'])).stdout.trim();
    const bin = await mkdtemp(path.join(scratch, 'nofilter-'));
    // Refuses --seccomp as a kernel without seccomp filters would, and is bubblewrap otherwise.
    await writeFile(
      path.join(bin, 'bwrap'),
      `#!/bin/sh\nfor arg in "$@"; do [ "$arg" = "--seccomp" ] && { echo "bwrap: seccomp filters are not supported" >&2; exit 1; }; done\nexec '${real}' "$@"\n`,
      { mode: 0o755 },
    );
    const run = await gate(path.join(fixtures, 'asyncio_tcp.py'), { env: { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` } });
    expect(run.stderr).toMatch(/warning: the sandbox runs without its seccomp filter/);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout).environment.isolation).toBe('bwrap');
  });

  it('a worker that comes up in the sandbox spares the probe; one that cannot is probed, and auto falls back and says why', async () => {
    const real = (await execa('sh', ['-c', 'command -v bwrap'])).stdout.trim();
    const calls = path.join(scratch, 'bwrap-calls');
    const run = async (script: string) => {
      const bin = await mkdtemp(path.join(scratch, 'bwrap-'));
      await writeFile(path.join(bin, 'bwrap'), `#!/bin/sh\necho "$*" >> '${calls}'\n${script}`, { mode: 0o755 });
      await rm(calls, { force: true });
      const done = await execa(
        process.execPath,
        [BIN, 'gate', '--reward', 'examples/verifiers/strict.py:reward', '--answer', '42', '--python', PYTHON, '--sandbox', 'auto', '--json'],
        {
          cwd: PACKAGE_ROOT,
          reject: false,
          stdin: 'ignore',
          env: { FORCE_COLOR: '0', PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` },
        },
      );
      const lines = (await readFile(calls, 'utf8')).split('\n').filter(Boolean);
      return { done, probes: lines.filter((line) => line.endsWith('/bin/sh -c exit 0')).length, launches: lines.length };
    };
    const working = await run(`exec '${real}' "$@"\n`);
    expect(working.done.exitCode, working.done.stderr).toBe(0);
    expect(JSON.parse(working.done.stdout).environment.isolation).toBe('bwrap');
    expect(working.probes).toBe(0);
    expect(working.launches).toBeGreaterThanOrEqual(2);
    const broken = await run('echo "bwrap: No permissions to create new namespace" >&2\nexit 1\n');
    expect(broken.done.exitCode, broken.done.stderr).toBe(0);
    expect(broken.probes).toBeGreaterThan(0);
    expect(broken.done.stderr).toMatch(/warning: the verifier is NOT isolated.*No permissions to create new namespace/);
    expect(JSON.parse(broken.done.stdout).environment.isolation).toBe('none');
  });

  it.skipIf(!HAS_FILTER)('every process started in the sandbox is filtered, and holds no descriptor of the filter', async () => {
    const sandbox = await openSandbox('bwrap');
    const probe = [
      'import os, socket',
      'fds = os.listdir("/proc/self/fd")',
      'links = [os.readlink("/proc/self/fd/" + fd) for fd in fds if os.path.exists("/proc/self/fd/" + fd)]',
      'status = dict(line.split(":", 1) for line in open("/proc/self/status"))',
      'try:',
      '    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)',
      '    unix = "allowed"',
      'except OSError as error:',
      '    unix = error.errno',
      'print(repr((links, status["Seccomp"].strip(), unix)))',
    ].join('\n');
    for (const protocol of [false, true]) {
      const dir = await mkdtemp(path.join(scratch, 'process-'));
      await mkdir(path.join(dir, 'home'));
      await mkdir(path.join(dir, 'tmp'));
      const proc = await PythonProcess.start({
        python: PYTHON,
        args: ['-c', probe],
        cwd: dir,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
        protocol,
        outputCapBytes: 64_000,
        minimumVersion: '3.10',
        sandbox: { sandbox, layout: { scratch: dir, readable: [] } },
      });
      await proc.closed;
      expect(proc.exitInfo, proc.stderr.text()).toEqual({ code: 0, signal: null });
      const output = proc.stdout.text();
      expect(output).not.toMatch(/seccomp/);
      // Filter mode, and a unix datagram socket refused with EACCES (a stream socket of its own is allowed).
      expect(output).toMatch(/, '2', 13\)$/m);
      expect((await readdir(dir)).sort()).toEqual(['app-source', 'group', 'home', 'init-cmdline', 'passwd', 'seccomp.bpf', 'tmp']);
    }
  });
});
