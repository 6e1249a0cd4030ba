import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GatekeptError } from '../errors.js';
import { loaderConfig, shimLoad, type EnvLoad } from '../env-audit/env-load.js';
import { copyEnvShim, inspectEnv } from '../env-audit/inspect-env.js';
import type { SandboxMode } from '../runtime/sandbox.js';
import type { Rollout } from './read-rollouts.js';

/**
 * `scan --env`: rollouts scored through an environment's own path, as
 * `audit --env` gates it. The verifier is the same shim (python/env_shim.py)
 * in a directory of its own, returning the environment's weighted total for
 * a completion on one of its rows under any gold. Each rollout is matched to
 * the row it was run on, by its prompt and answer (a classic rollout's
 * `example_id` when the prompt is not found), and carries that row in its
 * info as the shim expects.
 */

export interface EnvScoring {
  /** The verifier spec the scan's workers import. */
  reward: string;
  /**
   * What puts the row a rollout was run on in its info (null when no row of
   * the environment has its prompt and answer), once the loader has read the
   * rows: the workers load the environment meanwhile.
   */
  placer: Promise<(rollout: Rollout) => Rollout | null>;
  close(): Promise<void>;
}

export interface EnvScoringOptions {
  /** A package directory (absolute) or an installed module name. */
  spec: string;
  python: string;
  pythonpath: readonly string[];
  importMs: number;
  memoryMb: number;
  sandbox?: SandboxMode;
  /** The environment's rows, when the caller has loaded it already (audit --env): it is not loaded again. */
  rows?: readonly EnvRow[];
  /** With `rows`: how the caller loaded it (audit --env's arguments, local datasets, cache), for the workers to load it alike. */
  load?: EnvLoad;
}

export interface EnvRow {
  prompt: string | null;
  answer: string | null;
}

/** The environment's rows, read by loading it once outside the workers. */
async function loadRows(options: EnvScoringOptions): Promise<readonly EnvRow[]> {
  const inspected = await inspectEnv({
    spec: options.spec,
    python: options.python,
    pythonpath: options.pythonpath,
    // Loading builds the dataset too: the import budget twice, as audit --env allows.
    timeoutMs: options.importMs * 2,
    memoryMb: options.memoryMb,
    ...(options.sandbox ? { sandbox: options.sandbox } : {}),
  });
  if (!inspected.ok) {
    throw new GatekeptError('BAD_ARGUMENT', `environment ${options.spec} does not load (${inspected.stage}): ${inspected.error}`, {
      suggestion: 'check it with gatekept audit --env first, or pass its reward function with --reward',
    });
  }
  return inspected.rows;
}

const key = (prompt: string | null, answer: string): string => `${(prompt ?? '').trim()}\u241f${answer.trim()}`;

/**
 * The row each rollout was run on, put in its info as the shim expects: by
 * its prompt and answer, else a classic rollout's `example_id` when that row
 * has its answer; null when no row matches.
 */
export function rowPlacer(rows: readonly EnvRow[]): (rollout: Rollout) => Rollout | null {
  const byPrompt = new Map<string, number>();
  rows.forEach((row, index) => {
    if (row.answer !== null && !byPrompt.has(key(row.prompt, row.answer))) byPrompt.set(key(row.prompt, row.answer), index);
  });
  return (rollout) => {
    let row = byPrompt.get(key(rollout.prompt, rollout.answer));
    if (row === undefined && /^\d+$/.test(rollout.id) && rows[Number(rollout.id)]?.answer?.trim() === rollout.answer.trim()) row = Number(rollout.id);
    return row === undefined ? null : { ...rollout, info: { ...rollout.info, gatekept_row: row } };
  };
}

export async function openEnvScoring(options: EnvScoringOptions): Promise<EnvScoring> {
  const dir = await mkdtemp(path.join(tmpdir(), `gatekept-scan-shim-${process.pid}-`));
  try {
    await copyEnvShim(dir);
    const load = options.load ? loaderConfig(await shimLoad(options.load, dir)) : null;
    await writeFile(path.join(dir, 'env_shim.json'), JSON.stringify({ spec: options.spec, reward: null, load }));
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const placer = options.rows ? Promise.resolve(rowPlacer(options.rows)) : loadRows(options).then(rowPlacer);
  // Awaited by the scan once its workers are starting; a load that fails is reported there.
  placer.catch(() => undefined);
  return {
    reward: `${path.join(dir, 'env_shim.py')}:reward`,
    placer,
    close: async () => {
      // The loader ends before the shim's directory goes, whichever way the scan ended.
      await placer.catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
