import type { SandboxMode } from '../runtime/sandbox.js';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gate, type GateResult } from '../audit/gate.js';
import type { GatePolicy } from '../audit/policy.js';
import type { AnswerFormat, AnswerType } from '../types.js';
import { ENV_LOADER_PATH, ENV_SHIM_PATH } from './inspect-env.js';

/**
 * Run the gate through an environment's own scoring path: the verifier the
 * gate imports is python/env_shim.py, copied with the loader into a directory
 * of its own together with a JSON file naming the environment and the reward
 * to return (null: the weighted total). The golds are the environment's rows;
 * each carries its row number in `info`, so the shim can substitute whatever
 * gold the gate chooses into that row's data.
 */

export interface EnvGateRow {
  /** The row's position in the environment's dataset. */
  row: number;
  answer: string;
  prompt: string | null;
}

export interface EnvGateOptions {
  spec: string;
  /** null: the weighted total; else one reward function by name. */
  reward: string | null;
  rows: readonly EnvGateRow[];
  python: string;
  /** Isolation of the gate's workers (see gate()). */
  sandbox?: SandboxMode;
  pythonpath: readonly string[];
  policy: GatePolicy;
  answerType: AnswerType | 'auto';
  choices?: readonly string[];
  format: AnswerFormat | 'auto';
  workers?: number;
  onProgress?: (done: number, total: number) => void;
}

export async function gateThroughEnv(options: EnvGateOptions): Promise<GateResult> {
  const dir = await mkdtemp(path.join(tmpdir(), `gatekept-shim-${process.pid}-`));
  try {
    await copyFile(ENV_SHIM_PATH, path.join(dir, 'env_shim.py'));
    await copyFile(ENV_LOADER_PATH, path.join(dir, 'env_loader.py'));
    await writeFile(path.join(dir, 'env_shim.json'), JSON.stringify({ spec: options.spec, reward: options.reward }));
    const result = await gate({
      reward: `${path.join(dir, 'env_shim.py')}:reward`,
      dataset: options.rows.map((row) => ({ answer: row.answer, prompt: row.prompt, info: { gatekept_row: row.row } })),
      answerType: options.answerType,
      ...(options.choices ? { choices: options.choices } : {}),
      format: options.format,
      policy: options.policy,
      python: options.python,
      ...(options.sandbox ? { sandbox: options.sandbox } : {}),
      // The environment's own directory is bound into the sandbox, which
      // sees nothing of the host it is not given.
      pythonpath: [...options.pythonpath, ...(path.isAbsolute(options.spec) ? [options.spec] : [])],
      completionFormat: 'string',
      ...(options.workers !== undefined ? { workers: options.workers } : {}),
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
    // The shim's temporary path would make the record differ from run to run; name what was gated instead.
    result.record.verifier.spec = `${options.spec} (${options.reward === null ? 'weighted total' : `reward ${options.reward}`})`;
    return result;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
