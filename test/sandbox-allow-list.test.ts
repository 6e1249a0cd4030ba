/**
 * The sandbox as an allow-list: the verifier sees only what it is given, and
 * gatekept never follows a path the verifier could have touched. Each case
 * is a hostile verifier run through the real CLI under bubblewrap; those
 * that probe raise "LEAKED ..." from their reward while something got out,
 * and the honest one must pass.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../src/paths.js';
import { openSandbox } from '../src/runtime/sandbox.js';
import { seccompProgram } from '../src/runtime/seccomp.js';

const BIN = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');
const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';
const HAS_BWRAP = (await openSandbox('auto')).kind === 'bwrap';
const HAS_FILTER = seccompProgram() !== null;
const VICTIM_FILES = 400;

let scratch: string;
let fixtures: string;
let victimDir: string;
let dgram: string;
let listener: ChildProcess | null = null;
const received: string[] = [];

beforeAll(async () => {
  if (!HAS_BWRAP) return;
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-allow-'));
  fixtures = path.join(scratch, 'project');
  await cp(path.join(PACKAGE_ROOT, 'test', 'fixtures', 'allow-list'), fixtures, { recursive: true });
  // The user's secrets beside the verifier, some behind links.
  await writeFile(path.join(fixtures, '.env'), 'TOKEN=SECRET-env\n');
  await writeFile(path.join(fixtures, '.npmrc'), '//registry/:_authToken=SECRET-npm\n');
  await mkdir(path.join(fixtures, 'dotfiles', 'aws'), { recursive: true });
  await writeFile(path.join(fixtures, 'dotfiles', 'aws', 'credentials'), 'SECRET-aws\n');
  await writeFile(path.join(fixtures, 'dotfiles', 'netrc'), 'machine x password SECRET-netrc\n');
  await symlink('dotfiles/aws', path.join(fixtures, '.aws'));
  await symlink('dotfiles/netrc', path.join(fixtures, '.netrc'));
  // A host directory the verifier's links point at.
  victimDir = path.join(scratch, 'victim');
  await mkdir(victimDir);
  for (let index = 0; index < VICTIM_FILES; index += 1) await writeFile(path.join(victimDir, `file-${index}`), 'keep');
  // A host service's datagram socket inside a directory the sandbox reads (the verifier's own).
  dgram = path.join(fixtures, 'dgram.sock');
  listener = spawn(
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
  const child = listener;
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      for (const line of chunk.split('\n').filter(Boolean)) {
        if (line === 'ready') resolve();
        else received.push(line);
      }
    });
  });
  await writeFile(path.join(fixtures, 'probe_config.json'), JSON.stringify({ victim_dir: victimDir, dgram, hostname: os.hostname() }));
});

afterAll(async () => {
  if (!HAS_BWRAP) return;
  listener?.kill('SIGKILL');
  await rm(scratch, { recursive: true, force: true });
});

interface GateRun {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
}

/** Gate a fixture; `shell` runs before gatekept in the same shell (to leave descriptors open). */
async function gate(fixture: string, shell = ''): Promise<GateRun> {
  const tmp = await mkdtemp(path.join(scratch, 'run-'));
  const policy = path.join(tmp, 'policy.toml');
  await writeFile(policy, '[timeouts]\ncall_ms = 5000\nimport_ms = 60000\ntotal_s = 600\n\n[limits]\nmemory_mb = 1024\n');
  const argv = [
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
    'bwrap',
    '--json',
  ];
  const quoted = [process.execPath, ...argv].map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(' ');
  const run = await execa('bash', ['-c', `${shell}\nexec ${quoted}`], {
    cwd: fixtures,
    reject: false,
    stdin: 'ignore',
    env: { TMPDIR: tmp, FORCE_COLOR: '0' },
  });
  return { exitCode: run.exitCode, stdout: run.stdout, stderr: run.stderr };
}

function leaks(run: GateRun): string[] {
  return [...new Set(run.stdout.match(/LEAKED [^"\\]*/g) ?? [])];
}

describe.skipIf(!HAS_BWRAP)('the sandbox binds in only what it is given', () => {
  it("a project's dot-files, links to them, /sys, other roots and the host's accounts stay out of reach", async () => {
    const run = await gate('project_secrets');
    expect(leaks(run)).toEqual([]);
    expect(run.stdout).toMatch(/"decision": ?"PASS"/);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout).not.toMatch(/SECRET-/);
  });

  it("the host name inside is the host's own, as in training on this machine, not a constant that says audit", async () => {
    const run = await gate('host_name');
    expect(leaks(run)).toEqual([]);
    expect(run.exitCode, run.stderr).toBe(0);
  });

  it('descriptors the caller left open are closed before the verifier runs', async () => {
    const secret = path.join(scratch, 'fd-secret');
    const log = path.join(scratch, 'fd-log');
    await writeFile(secret, 'SECRET-fd\n');
    await writeFile(log, '');
    const run = await gate('inherited', `exec 200<'${secret}' 201>>'${log}'`);
    expect(leaks(run)).toEqual([]);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(await readFile(log, 'utf8')).toBe('');
  });

  it.skipIf(!HAS_FILTER)('the keyring, raw unix socket pairs and ptrace are refused', async () => {
    const run = await gate('kernel_reach');
    await sleep(100);
    expect(received, 'delivered to the host socket').toEqual([]);
    expect(leaks(run)).toEqual([]);
    expect(run.stdout).toMatch(/"decision": ?"PASS"/);
    expect(run.exitCode, run.stderr).toBe(0);
  });

  it.skipIf(!HAS_FILTER)('a verifier that stops its supervisor on a schedule cannot stall the audit', async () => {
    const run = await gate('stop_supervisor');
    expect(run.stdout).toMatch(/"decision": ?"PASS"/);
    expect(run.exitCode, run.stderr).toBe(0);
  });

  it('a verifier that has the kernel stop its supervisor (a descriptor whose I/O signal is SIGSTOP, owned by the supervisor) is refused and rejected', async () => {
    const run = await gate('owner_signal_call');
    expect(run.stdout).toMatch(/"kind": ?"kill_blocked"/);
    expect(run.stdout).toMatch(/set the signal owner of a descriptor/);
    expect(run.stdout).toMatch(/"decision": ?"REJECT"/);
    expect(run.exitCode, run.stderr).toBe(1);
  });

  it('a verifier that has the kernel stop its whole process group while it warms up cannot stall the audit', async () => {
    const run = await gate('owner_signal_group');
    expect(run.stdout).toMatch(/"decision": ?"PASS"/);
    expect(run.exitCode, run.stderr).toBe(0);
  });

  it('a verifier that puts /dev/null on its reply descriptor at import ends the gate at once as could not audit', async () => {
    const run = await gate('null_reply');
    expect(run.stderr).toMatch(/closed or replaced the descriptor its answers go out on/);
    expect(run.stderr).not.toMatch(/VERIFIER_IMPORT_TIMEOUT/);
    expect(run.exitCode, run.stderr).toBe(3);
  });

  it('a worker stopped in a call fails the audit as could not audit, never a timeout or a verdict', async () => {
    const run = await gate('stop_itself');
    expect(run.stderr).toMatch(/a process of the audit was stopped during a call/);
    expect(run.stdout).not.toMatch(/"decision"/);
    expect(run.exitCode, run.stderr).toBe(3);
  });

  it("links swapped into the verifier's home while the calls end never lead gatekept to a host directory", async () => {
    const run = await gate('home_swap');
    expect(run.exitCode, run.stderr).toBeLessThanOrEqual(1);
    expect((await readdir(victimDir)).length).toBe(VICTIM_FILES);
  });

  it('honest scratch work passes: /dev/shm, pipes, socket pairs, a cache in $HOME and an atomic write at import', async () => {
    const run = await gate('honest_scratch');
    expect(run.stdout).not.toMatch(/side_effects": ?\[\s*\{/);
    expect(run.stdout).toMatch(/"decision": ?"PASS"/);
    expect(run.exitCode, run.stderr).toBe(0);
  });
});

describe.skipIf(!HAS_BWRAP)('the record names only what gatekept saw for itself', () => {
  it("a module's __file__ pointing elsewhere: the sha256 is of the file the import loaded", async () => {
    const tmp = await mkdtemp(path.join(scratch, 'run-'));
    const run = await execa(
      process.execPath,
      [BIN, 'gate', '--reward', 'spoof_file:reward', '--pythonpath', fixtures, '--answer', '42', '--python', PYTHON, '--sandbox', 'bwrap', '--json'],
      { cwd: fixtures, reject: false, stdin: 'ignore', env: { TMPDIR: tmp, FORCE_COLOR: '0' } },
    );
    expect(run.exitCode, run.stderr).toBe(0);
    const record = JSON.parse(run.stdout) as { verifier: { sha256: string | null } };
    const expected = createHash('sha256')
      .update(await readFile(path.join(fixtures, 'spoof_file.py')))
      .digest('hex');
    expect(record.verifier.sha256).toBe(expected);
  });

  it('a verifier strict only while its process opens on a short completion is not a function of its inputs', async () => {
    const run = await gate('first_short');
    expect(run.stdout).toMatch(/NOT_A_FUNCTION/);
    expect(run.exitCode, run.stderr).toBe(1);
  });

  it("a verifier strict only in a process that opens as an audit's worker or its re-check did is rejected", async () => {
    const run = await gate('calibration_first');
    expect(run.stdout).toMatch(/"decision": ?"REJECT"/);
    expect(run.exitCode, run.stderr).toBe(1);
  });

  it('a verifier that points its reply descriptor at /dev/null ends the gate as could not audit (exit 3), never a hang or a verdict', async () => {
    const run = await gate('silence_replies');
    expect(run.exitCode, run.stderr).toBe(3);
    expect(run.stderr).toMatch(/ended its process or closed or replaced its descriptors|closed or replaced the descriptor its answers go out on/);
    expect(run.stdout).not.toMatch(/"decision"/);
  });

  it('a ready message forged at import reaches neither the record nor the terminal', async () => {
    const run = await gate('forged_ready');
    const esc = String.fromCharCode(27);
    expect(run.stdout).not.toMatch(/<script>|0{64}/);
    expect(run.stdout.includes(esc) || run.stderr.includes(esc)).toBe(false);
    expect(run.stderr).not.toMatch(/<script>/);
    if (run.exitCode === 0) {
      const record = JSON.parse(run.stdout) as { environment: { python: string } };
      expect(record.environment.python).toMatch(/^\d+\.\d+\.\d+$/);
    } else {
      expect(run.exitCode).toBe(3);
    }
  });
});
