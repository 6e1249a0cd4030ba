import { statSync } from 'node:fs';
import type { Verifier } from '../calls.js';
import { GatekeptError } from '../errors.js';
import { WorkerPool, type PoolOptions } from './worker-pool.js';

/**
 * A verifier run by Python workers: a pool whose first worker starts now
 * (`calls.ready` says when it is up), and fresh sessions opened on demand.
 */
export function startPythonVerifier(options: PoolOptions): Verifier {
  const { workers: _workers, batchSize: _batchSize, ray: _ray, onActorLost: _onActorLost, ...sessionOptions } = options;
  const calls = WorkerPool.start(options);
  return {
    calls,
    // Not warmed up: it opens on the longest attack (see rescore.ts), as a
    // training run's process opens on a long completion. Where the pool's
    // workers run on a Ray cluster, so does it: a process of its own that
    // has seen no call, started by an actor.
    openFresh: () => calls.openSession({ ...sessionOptions, warmUp: false }),
  };
}

/** An entry of --pythonpath is a directory that exists: a file there would be bound and searched for nothing. */
export function checkImportDirectory(dir: string, given: string): void {
  let isDirectory = false;
  try {
    isDirectory = statSync(dir).isDirectory();
  } catch {
    throw new GatekeptError('BAD_ARGUMENT', `--pythonpath ${given} does not exist`, { suggestion: 'give a directory the verifier imports from' });
  }
  if (!isDirectory) {
    throw new GatekeptError('BAD_ARGUMENT', `--pythonpath ${given} is not a directory`, {
      suggestion: 'give the directory that holds the module (for one file, pass it as --reward path/to/file.py:function instead)',
    });
  }
}
