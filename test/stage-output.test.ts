/**
 * The staged tree is re-read before it is moved into place: only the files
 * gatekept wrote, with the bytes it wrote. A process the verifier left
 * running (without the sandbox) that rewrites an emitted verifier after the
 * audit recorded its sha256 must make the pack refuse, writing nothing.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { commitStaging, createStaging, discardStaging, verifyStaged, writeStagedFile } from '../src/pack/stage-output.js';

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-stage-test-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function staged(name: string): Promise<{ out: string; dir: string }> {
  const out = path.join(scratch, name);
  const dir = await createStaging(out);
  await writeStagedFile(dir, 'gatekept_audit.json', '{"decision": "PASS"}');
  await writeStagedFile(dir, 'verifiers/env/reward.py', 'def reward(completion, answer):\n    return float(completion == answer)\n');
  return { out, dir };
}

it('a staged tree exactly as written is committed', async () => {
  const { out, dir } = await staged('intact');
  await verifyStaged(dir);
  await commitStaging(dir, out, false);
  expect(existsSync(path.join(out, 'verifiers', 'env', 'reward.py'))).toBe(true);
});

it.each([
  [
    'a rewritten verifier',
    (dir: string) => writeFile(path.join(dir, 'verifiers', 'env', 'reward.py'), 'def reward(completion, answer):\n    return 1.0\n'),
    /reward\.py differs from what gatekept wrote/,
  ],
  ['a planted file', (dir: string) => writeFile(path.join(dir, 'verifiers', 'env', 'extra.py'), 'x = 1\n'), /extra\.py was not written by gatekept/],
  ['a symlink', (dir: string) => symlink('/etc/hostname', path.join(dir, 'verifiers', 'link')), /link is a symbolic link/],
  ['a removed file', (dir: string) => rm(path.join(dir, 'gatekept_audit.json')), /gatekept_audit\.json is missing/],
] as const)('%s after the audit stops the commit and nothing reaches --out', async (_name, tamper, message) => {
  const { out, dir } = await staged(`tampered-${_name.replaceAll(' ', '-')}`);
  await tamper(dir);
  await expect(commitStaging(dir, out, false)).rejects.toThrow(message);
  expect(existsSync(out)).toBe(false);
  await discardStaging(dir);
});
