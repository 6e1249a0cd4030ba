/**
 * The interpreter probe kept between runs, and the harness compiled once per
 * interpreter: a second run starts no probe, a changed interpreter is asked
 * again, and workers run the compiled harness; a compiled file changed in
 * the cache is never run, and is compiled again.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../src/paths.js';
import { COMPILED_SOURCES } from '../src/runtime/runtime-cache.js';
import { openSandbox } from '../src/runtime/sandbox.js';

const PYTHON = process.env.GATEKEPT_PYTHON ?? 'python3';
const BIN = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');
const HAS_BWRAP = (await openSandbox('auto')).kind === 'bwrap';
let scratch: string;
let wrapper: string;
let counter: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-runtime-cache-test-'));
  counter = path.join(scratch, 'starts');
  wrapper = path.join(scratch, 'python');
  const real = execFileSync(PYTHON, ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim();
  // Counts every start of the interpreter through this path.
  await writeFile(wrapper, `#!/bin/sh\necho x >> '${counter}'\nexec '${real}' "$@"\n`);
  await chmod(wrapper, 0o755);
  // Rewards the gold only when the harness and the calling convention it
  // imported both run compiled, so a PASS says they did.
  await writeFile(
    path.join(scratch, 'verifier.py'),
    [
      'import gc, types',
      'SHARED = [m for m in gc.get_objects() if isinstance(m, types.ModuleType) and m.__name__ == "gatekept_reward"]',
      'SHARED_COMPILED = bool(SHARED) and all(m.__spec__.origin.endswith(".pyc") for m in SHARED)',
      'def reward(completion, answer):',
      '    with open("/proc/self/cmdline", "rb") as f:',
      '        compiled = f.read().split(b"\\0")[-2].endswith(b".pyc")',
      '    return 1.0 if compiled and SHARED_COMPILED and completion[-1]["content"] == "\\\\boxed{%s}" % answer else 0.0',
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function starts(): Promise<number> {
  return (await readFile(counter, 'utf8').catch(() => '')).split('\n').filter(Boolean).length;
}

function gate(sandbox = 'none'): void {
  execFileSync(
    process.execPath,
    [BIN, 'gate', '--reward', path.join(scratch, 'verifier.py:reward'), '--answer', '42', '--python', wrapper, '--sandbox', sandbox, '--json'],
    {
      cwd: scratch,
      env: { ...process.env, XDG_CACHE_HOME: path.join(scratch, 'cache') },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
}

it('probes an interpreter once across runs, again when it changed, and runs the compiled harness', async () => {
  // The verifier rewards the gold only when it runs under the compiled harness, so a PASS says it did.
  gate();
  const first = await starts();
  const compiled = await readdir(path.join(scratch, 'cache', 'gatekept', 'bytecode'));
  expect(compiled).toHaveLength(1);
  expect((await readdir(path.join(scratch, 'cache', 'gatekept', 'bytecode', compiled[0]!))).sort()).toEqual(COMPILED_SOURCES.map((name) => `${name}c`).sort());
  gate();
  // The second run started only its workers: one probe fewer.
  const second = (await starts()) - first;
  expect(second).toBe(first - 1);
  // A changed interpreter is asked again.
  await writeFile(wrapper, `${await readFile(wrapper, 'utf8')}\n`);
  gate();
  expect((await starts()) - first - second).toBe(first);
}, 60_000);

it.skipIf(!HAS_BWRAP)(
  'runs the compiled harness and calling convention in the sandbox too, and a sandboxed run leaves the probe cached',
  async () => {
    // execFileSync throws on the exit code of a REJECT: the gold went unrewarded.
    gate('bwrap');
    // Sandboxed workers start the interpreter's own executable, not the
    // wrapper: a start through the wrapper is a probe. Each launch links the
    // compiled scripts into its own directory, which must not read as a
    // changed interpreter to the next run.
    const before = await starts();
    gate('bwrap');
    gate('bwrap');
    expect(await starts()).toBe(before);
  },
  60_000,
);

/** A gate run with its own cache, whatever its exit code. */
function gateIn(cache: string, sandbox: string) {
  return spawnSync(
    process.execPath,
    [BIN, 'gate', '--reward', path.join(scratch, 'verifier.py:reward'), '--answer', '42', '--python', wrapper, '--sandbox', sandbox, '--json'],
    { cwd: scratch, env: { ...process.env, XDG_CACHE_HOME: cache }, encoding: 'utf8' },
  );
}

const sha256 = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');

it.each(HAS_BWRAP ? ['none', 'bwrap'] : ['none'])(
  'never runs a compiled file rewritten in the cache with its size and mtime kept, but compiles it again and says so (sandbox %s)',
  async (sandbox) => {
    const cache = path.join(scratch, `tampered-${sandbox}`);
    const first = gateIn(cache, sandbox);
    expect(first.status, first.stderr).toBe(0);
    expect(first.stderr).not.toMatch(/compiled it again/);
    const [dir] = await readdir(path.join(cache, 'gatekept', 'bytecode'));
    const calls = path.join(cache, 'gatekept', 'bytecode', dir!, 'gatekept_calls.pyc');
    const genuine = sha256(calls);
    const before = statSync(calls);
    // What a verifier run without the sandbox could do to every later run:
    // rewrite the calling convention in place, past its header, and set its
    // mtime back, so every stamp the cache kept still matches.
    execFileSync(PYTHON, [
      '-c',
      [
        'import os, sys',
        'before = os.stat(sys.argv[1])',
        'with open(sys.argv[1], "r+b") as f:',
        '    f.seek(16)',
        '    f.write(b"N" * min(256, before.st_size - 16))',
        'os.utime(sys.argv[1], ns=(before.st_atime_ns, before.st_mtime_ns))',
      ].join('\n'),
      calls,
    ]);
    const after = statSync(calls);
    expect([after.ino, after.size, after.mtimeMs]).toEqual([before.ino, before.size, before.mtimeMs]);
    expect(sha256(calls)).not.toBe(genuine);
    // The verifier rewards the gold only under the compiled harness: a PASS
    // says the run used compiled files, and the check says they were genuine.
    const second = gateIn(cache, sandbox);
    expect(second.status, second.stderr).toBe(0);
    expect(second.stderr).toMatch(
      /warning: the compiled harness in .* changed after gatekept compiled it \(gatekept_calls\.pyc is not the file gatekept compiled\); compiled it again/,
    );
    expect(JSON.parse(second.stdout).decision).toBe('PASS');
    expect(sha256(calls)).toBe(genuine);
    // Compiled again once: the next run finds it genuine and says nothing.
    const third = gateIn(cache, sandbox);
    expect(third.status, third.stderr).toBe(0);
    expect(third.stderr).not.toMatch(/compiled it again/);
  },
  90_000,
);
