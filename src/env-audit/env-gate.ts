import type { SandboxMode } from '../runtime/sandbox.js';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gate, type GateResult } from '../gate.js';
import type { GatePolicy } from '../audit/policy.js';
import { GatekeptError, isGatekeptError } from '../errors.js';
import type { AnswerFormat, AnswerType } from '../types.js';
import { loaderConfig, type EnvLoad } from './env-load.js';
import { copyEnvShim } from './inspect-env.js';

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
  format: AnswerFormat | 'auto' | string | readonly string[];
  strict?: boolean;
  workers?: number;
  /** Arguments, local datasets and the Hugging Face cache, as for inspecting it. */
  load?: EnvLoad;
  onProgress?: (done: number, total: number) => void;
}

async function shimLoad(load: EnvLoad, dir: string): Promise<EnvLoad> {
  const datasets: Record<string, string> = {};
  let index = 0;
  for (const [name, file] of Object.entries(load.datasets)) {
    const copy = path.join(dir, `dataset-${index++}${path.extname(file)}`);
    await copyFile(file, copy);
    datasets[name] = copy;
  }
  return { ...load, datasets };
}

function cacheDirs(load: EnvLoad): string[] {
  return [load.hf.datasets, load.hf.hub].filter((entry): entry is string => entry !== null);
}

export async function gateThroughEnv(options: EnvGateOptions): Promise<GateResult> {
  const dir = await mkdtemp(path.join(tmpdir(), `gatekept-shim-${process.pid}-`));
  const label = `${options.spec} (${options.reward === null ? 'weighted total' : `reward ${options.reward}`})`;
  try {
    await copyEnvShim(dir);
    // The gate makes only the verifier's directory and --pythonpath readable
    // in its workers: local dataset files are copied beside the shim, and the
    // cache directories ride on the import path, which the shim takes them
    // off again before anything imports.
    const load = options.load ? await shimLoad(options.load, dir) : null;
    await writeFile(path.join(dir, 'env_shim.json'), JSON.stringify({ spec: options.spec, reward: options.reward, load: load && loaderConfig(load) }));
    const result = await gate({
      reward: `${path.join(dir, 'env_shim.py')}:reward`,
      dataset: options.rows.map((row) => ({ answer: row.answer, prompt: row.prompt, info: { gatekept_row: row.row } })),
      answerType: options.answerType,
      ...(options.choices ? { choices: options.choices } : {}),
      format: options.format,
      policy: options.policy,
      python: options.python,
      ...(options.sandbox ? { sandbox: options.sandbox } : {}),
      // The environment's own directory (and the Hugging Face cache it reads)
      // are bound into the sandbox, which sees nothing of the host it is not given.
      pythonpath: [...options.pythonpath, ...(path.isAbsolute(options.spec) ? [options.spec] : []), ...(load ? cacheDirs(load) : [])],
      completionFormat: 'string',
      ...(options.strict ? { strict: true } : {}),
      ...(options.workers !== undefined ? { workers: options.workers } : {}),
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
    // The shim's temporary path would make the record differ from run to run; name what was gated instead.
    result.record.verifier.spec = label;
    return result;
  } catch (error) {
    // Likewise in what went wrong: the user knows the environment, not the shim.
    if (!isGatekeptError(error)) throw error;
    const shim = `${path.join(dir, 'env_shim.py')}:reward`;
    const named = (text: string) => text.split(shim).join(label).split(dir).join('<shim>');
    throw new GatekeptError(error.code, named(error.message), {
      details: error.details.map(named),
      ...(error.suggestion ? { suggestion: named(error.suggestion) } : {}),
      cause: error,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
