/**
 * `smoke --openenv` runs the package's server, and so its verifier, with no
 * network of the host's: the server and its player meet on the sandbox's own
 * loopback. The verifier here tries to reach a listener this test opens on
 * every IPv4 address of the host (127.0.0.1 included: the host's loopback is
 * not the sandbox's) and adds 1000 to its reward when it got through, so the
 * rewards say what the listener saw.
 */
import { createHash } from 'node:crypto';
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { gatekeep } from '../src/pack/pack.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { openSandbox } from '../src/runtime/sandbox.js';
import { smoke } from '../src/smoke/smoke.js';
import { testPython } from './support/test-python.js';

const HAS_BWRAP = (await openSandbox('auto')).kind === 'bwrap';

let scratch: string;
let listener: net.Server;
let port: number;
const connections: string[] = [];

/** Every IPv4 address of the host: the non-loopback ones first, then its loopback. */
function hostAddresses(): string[] {
  const addresses = Object.values(os.networkInterfaces())
    .flat()
    .filter((entry): entry is os.NetworkInterfaceInfo => entry?.family === 'IPv4')
    .map((entry) => entry.address);
  return [...new Set([...addresses.filter((address) => !address.startsWith('127.')), '127.0.0.1'])];
}

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'gatekept-smoke-network-'));
  listener = net.createServer((socket) => {
    connections.push(String(socket.remoteAddress));
    socket.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, '0.0.0.0', resolve));
  port = (listener.address() as net.AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => (listener ? listener.close(() => resolve()) : resolve()));
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('gatekept smoke --openenv and the network', () => {
  it('runs the package with no network of the host: a verifier that dials the host reaches nothing, and every reward is as audited', async (context) => {
    context.skip(!HAS_BWRAP, 'bubblewrap is not installed or cannot create namespaces here: without it smoke has no network isolation to test');
    const python = testPython('openenv');
    const root = path.join(scratch, 'out');
    const packed = await gatekeep({ seed: path.join(PACKAGE_ROOT, 'examples', 'arith.json'), outDir: root, python, targets: ['openenv'] });
    expect(packed.emitted).toBe(true);
    const dir = packed.packaged!.targets.openenv!;
    const verifier = path.join(dir, 'server', 'gatekept_verifier.py');
    const targets = hostAddresses().map((address) => `("${address}", ${String(port)})`);
    await appendFile(
      verifier,
      [
        '',
        'import socket as _probe_socket',
        'import sys as _probe_sys',
        '',
        '_audited_reward = reward',
        `_HOST_LISTENERS = [${targets.join(', ')}]`,
        '',
        '',
        'def reward(completion, answer, **kwargs):',
        '    reached = []',
        '    for address in _HOST_LISTENERS:',
        '        try:',
        '            _probe_socket.create_connection(address, timeout=3).close()',
        '            reached.append(address[0])',
        '        except OSError as error:',
        '            print("host listener %s unreachable: %s" % (address[0], error), file=_probe_sys.stderr)',
        '    score = _audited_reward(completion, answer, **kwargs)',
        '    return score + 1000.0 if reached else score',
        '',
      ].join('\n'),
    );
    // The audit vouches for this verifier: the package is honest but for its dialling out.
    const auditFile = packed.packaged!.audit;
    const audit = JSON.parse(await readFile(auditFile, 'utf8')) as { package: { verifier_sha256: string } };
    audit.package.verifier_sha256 = createHash('sha256')
      .update(await readFile(verifier))
      .digest('hex');
    await writeFile(auditFile, JSON.stringify(audit));

    const report = await smoke({ target: 'openenv', dir, python, sandbox: 'bwrap', timeoutS: 90 });
    expect(connections).toEqual([]);
    expect(report.episodes.length).toBeGreaterThan(0);
    expect(report.episodes.filter((episode) => !episode.ok)).toEqual([]);
    expect(report.checks.filter((check) => !check.ok)).toEqual([]);
    expect(report.checks.map((check) => check.name)).toEqual(['gold', 'verifier', 'health', 'schema', 'metadata']);
    expect(report.passed).toBe(true);
  }, 240_000);
});
