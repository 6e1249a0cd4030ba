import { createHash } from 'node:crypto';
import { cp, mkdir, mkdtemp, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { beforeAll, describe, expect, it } from 'vitest';
import { gatekeep } from '../src/pack/pack.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { pipInstall, testPython } from './support/test-python.js';

const python = process.env.GATEKEPT_PYTHON ?? 'python3';
const seed = (name: string) => path.join(PACKAGE_ROOT, 'examples', `${name}.json`);
const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

async function tree(root: string, prefix = ''): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const entry of await readdir(path.join(root, prefix), { withFileTypes: true })) {
    const relative = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) Object.assign(out, await tree(root, relative));
    else out[relative] = sha256(await readFile(path.join(root, relative)));
  }
  return out;
}

let scratch: string;
let first: Awaited<ReturnType<typeof gatekeep>>;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-pack-'));
  first = await gatekeep({ seed: seed('arith'), outDir: path.join(scratch, 'a', 'arith'), python, archive: true });
});

describe('gatekeep / pack', () => {
  it('emits both packages and the audit on PASS', async () => {
    expect(first.emitted).toBe(true);
    expect(first.exitCode).toBe(0);
    expect(first.gate.decision).toBe('PASS');
    expect(first.gate.summary()).toMatch(/survived these attacks at this budget and seed/);
    const files = await tree(first.packaged!.root);
    expect(Object.keys(files)).toContain('gatekept_audit.json');
    expect(Object.keys(files).some((file) => file.startsWith('verifiers/arith/'))).toBe(true);
    expect(Object.keys(files)).toContain('openenv/arith/openenv.yaml');
    expect(Object.keys(files)).toContain('arith-gatekept.zip');
    // No staging leftovers next to the output.
    expect(await readdir(path.join(scratch, 'a'))).toEqual(['arith']);
  });

  it('records hashes that match the verifier written into both packages and the seed', async () => {
    const audit = JSON.parse(await readFile(first.packaged!.audit, 'utf8'));
    const files = await tree(first.packaged!.root);
    const verifierFiles = Object.entries(files).filter(([file]) => file.endsWith('/gatekept_verifier.py'));
    expect(verifierFiles.map(([file]) => file.split('/')[0]).sort()).toEqual(['openenv', 'verifiers']);
    for (const [, digest] of verifierFiles) expect(digest).toBe(audit.package.verifier_sha256);
    expect(audit.verifier.sha256).toBe(audit.package.verifier_sha256);
    expect(audit.seed_file.sha256).toBe(sha256(await readFile(seed('arith'))));
    expect(audit.decision).toBe('PASS');
    expect(audit).not.toHaveProperty('timing');
    expect(audit.dataset_health.rows).toBe(64);
  });

  it('packing the same seed twice gives identical trees, archive included', async () => {
    const second = await gatekeep({ seed: seed('arith'), outDir: path.join(scratch, 'b', 'arith'), python, archive: true });
    expect(await tree(second.packaged!.root)).toEqual(await tree(first.packaged!.root));
  });

  it('a REJECT writes nothing, not even an empty directory', async () => {
    const out = path.join(scratch, 'lenient', 'deeper', 'out');
    const result = await gatekeep({ seed: seed('arith-lenient'), outDir: out, python });
    expect(result.emitted).toBe(false);
    expect(result.exitCode).toBe(1);
    expect(result.gate.record.hackability).toBeGreaterThanOrEqual(15);
    await expect(stat(path.join(scratch, 'lenient'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect((await readdir(scratch)).filter((name) => name.startsWith('.gatekept-staging'))).toEqual([]);
  });

  it('refuses a non-empty --out unless forced, and replaces it when forced', async () => {
    const out = path.join(scratch, 'busy');
    await mkdir(out);
    await writeFile(path.join(out, 'keep.txt'), 'mine');
    await expect(gatekeep({ seed: seed('facts-boolean'), outDir: out, python })).rejects.toMatchObject({ code: 'OUT_DIR_NOT_EMPTY' });
    expect(await readFile(path.join(out, 'keep.txt'), 'utf8')).toBe('mine');
    const forced = await gatekeep({ seed: seed('facts-boolean'), outDir: out, python, force: true });
    expect(forced.emitted).toBe(true);
    expect(await readdir(out)).not.toContain('keep.txt');
  });

  it.each(['capitals', 'science-choice', 'facts-boolean', 'arith-custom'])('the %s example passes and emits', async (name) => {
    const result = await gatekeep({ seed: seed(name), outDir: path.join(scratch, 'examples', name), python });
    expect(result.gate.record.reasons).toEqual([]);
    expect(result.emitted).toBe(true);
  });

  it('the CLI prints the scorecard, names what it emitted, and exits 0 / 1', async () => {
    const bin = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');
    const ok = await execa(process.execPath, [bin, 'pack', '--seed', seed('arith'), '--out', path.join(scratch, 'cli', 'arith'), '--python', python], { reject: false });
    expect(ok.exitCode).toBe(0);
    expect(ok.stdout).toMatch(/decision: PASS/);
    expect(ok.stderr).toMatch(/emitted .*verifiers\/arith, openenv\/arith, gatekept_audit\.json/);
    const bad = await execa(process.execPath, [bin, 'pack', '--seed', seed('arith-lenient'), '--out', path.join(scratch, 'cli', 'lenient'), '--python', python], { reject: false });
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr).toMatch(/nothing written/);
    await expect(stat(path.join(scratch, 'cli', 'lenient'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

// The emitted packages, copied as a clean clone would have them and installed
// into the test virtualenv, loaded by the real verifiers and OpenEnv libraries.
const CHECK = String.raw`
import asyncio, json, sys
import verifiers as vf
from verifiers.clients import Client
from verifiers.types import Response, ResponseMessage
from starlette.testclient import TestClient

gold_text, attack_text = sys.argv[1], sys.argv[2]

class Scripted(Client):
    def __init__(self, text):
        super().__init__(None)
        self.text = text
    def setup_client(self, config): return None
    async def to_native_tool(self, tool): return tool
    async def to_native_prompt(self, messages): return messages, {}
    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs): return self.text
    async def raise_from_native_response(self, response): return None
    async def from_native_response(self, response):
        return Response(id="s", created=0, model="s", message=ResponseMessage(content=response, finish_reason="stop", is_truncated=False))
    async def close(self): return None

import arith
env = arith.load_environment()
dataset = env.get_eval_dataset()

async def score(text):
    state = await env.rollout(dataset[0], Scripted(text), "scripted", {})
    await env.rubric.score_rollout(state)
    return state["reward"]

rewards = [asyncio.run(score(gold_text)), asyncio.run(score(attack_text))]

from arith_env.server.app import app
client = TestClient(app)
ws_rewards = []
with client.websocket_connect("/ws") as ws:
    for text in (gold_text, attack_text):
        ws.send_json({"type": "reset", "data": {"index": 0}})
        ws.receive_json()
        ws.send_json({"type": "step", "data": {"answer": text}})
        ws_rewards.append(ws.receive_json()["data"]["reward"])
print("RESULT " + json.dumps({"env": type(env).__name__, "rows": len(dataset), "answer0": dataset[0]["answer"], "verifiers": rewards, "openenv": ws_rewards}))
`;

describe('emitted packages in the real libraries', () => {
  it('verifiers: load_environment() has the rows and its rubric scores gold 1 and an attack 0; OpenEnv: /ws reset+step agree', async () => {
    const venvPython = testPython();
    const clean = await mkdtemp(path.join(os.tmpdir(), 'gatekept-clone-'));
    await cp(path.join(first.packaged!.root, 'verifiers', 'arith'), path.join(clean, 'verifiers-arith'), { recursive: true });
    await cp(path.join(first.packaged!.root, 'openenv', 'arith'), path.join(clean, 'openenv-arith'), { recursive: true });
    await pipInstall(venvPython, [path.join(clean, 'verifiers-arith'), path.join(clean, 'openenv-arith')]);
    const rows = (await readFile(path.join(first.packaged!.root, 'verifiers', 'arith', 'arith', 'data.jsonl'), 'utf8')).trim().split('\n').map((line) => JSON.parse(line));
    const gold = String(rows[0].answer);
    const attack = `\\boxed{1${gold.replace('-', '')}1}`;
    const run = await execa(venvPython, ['-c', CHECK, `The result is \\boxed{${gold}}.`, attack], {
      cwd: clean,
      reject: false,
      env: { HF_DATASETS_OFFLINE: '1', HF_HUB_OFFLINE: '1' },
    });
    const line = run.stdout.split('\n').find((text) => text.startsWith('RESULT '));
    if (!line) throw new Error(`check failed (exit ${run.exitCode}):\n${run.stderr}`);
    const result = JSON.parse(line.slice(7));
    expect(result.env).toBe('SingleTurnEnv');
    expect(result.rows).toBe(64);
    expect(String(result.answer0)).toBe(gold);
    expect(result.verifiers).toEqual([1, 0]);
    expect(result.openenv).toEqual([1, 0]);
  });
});
