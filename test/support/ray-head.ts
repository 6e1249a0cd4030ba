/**
 * A Ray head of the test's own, on loopback: its own temporary directory
 * (short, since Ray's unix socket paths must stay under ~107 characters) and
 * its own port. Stopped by killing the processes that name that directory,
 * never with `ray stop`, which stops every Ray on the machine.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { killAll, processesMarkedBy } from './processes.js';

/**
 * Ray otherwise advertises the machine's own address even for a head started
 * on 127.0.0.1; with this it keeps to loopback. Set for the head and, through
 * the RAY_* variables gatekept's driver is given, for the driver.
 */
export const RAY_LOOPBACK_ENV = { RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER: '0' };

/** The ray venv's interpreter, built now if need be; null when it cannot be built here. */
export function prepareRayPython(): string | null {
  const built = spawnSync('bash', [path.join(PACKAGE_ROOT, 'scripts', 'setup-python-env.sh'), 'ray'], { encoding: 'utf8', timeout: 900_000 });
  const python = built.status === 0 ? built.stdout.trim().split('\n').pop() : undefined;
  return python ? python : null;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export interface RayHead {
  address: string;
  stop(): Promise<void>;
}

export async function startRayHead(python: string): Promise<RayHead> {
  const dir = mkdtempSync('/tmp/gkray-');
  const port = await freePort();
  const ray = path.join(path.dirname(python), 'ray');
  const started = spawnSync(
    ray,
    [
      'start',
      '--head',
      '--num-cpus',
      '2',
      '--node-ip-address',
      '127.0.0.1',
      '--port',
      String(port),
      '--temp-dir',
      dir,
      '--disable-usage-stats',
      '--include-dashboard=false',
    ],
    { encoding: 'utf8', timeout: 120_000, env: { ...process.env, ...RAY_LOOPBACK_ENV } },
  );
  const stop = async (): Promise<void> => {
    killAll(await processesMarkedBy(dir));
    rmSync(dir, { recursive: true, force: true });
  };
  if (started.status !== 0) {
    await stop();
    throw new Error(`ray start failed: ${started.stderr}`);
  }
  return { address: `127.0.0.1:${port}`, stop };
}
