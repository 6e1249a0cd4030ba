import type { RayOptions } from '../runtime/ray/ray-backend.js';
import type { SandboxMode } from '../runtime/sandbox.js';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkGateOptions, gateStarted, verifierOptions, type CheckedGate, type GateOptions, type GateResult } from '../gate.js';
import type { CallQueue, EvalRequest, ExecutorInfo, EvalResult, QueueOptions, Verifier, VerifierInfo, VerifierSession } from '../calls.js';
import { startPythonVerifier } from '../runtime/python-verifier.js';
import type { GatePolicy } from '../audit/policy.js';
import { GatekeptError, isGatekeptError } from '../errors.js';
import type { AnswerFormat, AnswerType } from '../types.js';
import { loaderConfig, type EnvLoad } from './env-load.js';
import { copyEnvShim } from './inspect-env.js';

/**
 * Run the gate through an environment's own scoring path: the verifier the
 * gate imports is python/env_shim.py, copied with the loader into a directory
 * of its own together with a JSON file naming the environment. The golds are
 * the environment's rows; each carries its row number in `info`, so the shim
 * can substitute whatever gold the gate chooses into that row's data, and the
 * reward to return (null: the weighted total), so that one set of workers,
 * each loading the environment once, serves the gate of the total and of
 * every reward. Each gate still re-scores its sample in a fresh process of
 * its own, which has seen no call of any gate.
 */

export interface EnvGateRow {
  /** The row's position in the environment's dataset. */
  row: number;
  answer: string;
  prompt: string | null;
}

export interface EnvGateOptions {
  spec: string;
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
  /** Run the verifier's calls on a Ray cluster's actors (see runtime/ray). */
  ray?: RayOptions;
  /** Arguments, local datasets and the Hugging Face cache, as for inspecting it. */
  load?: EnvLoad;
  onProgress?: (done: number, total: number) => void;
}

/** The gates of one environment, sharing its workers; close() ends them. */
export interface EnvGates {
  /** Gate the weighted total (null) or one reward function by name. */
  gate(reward: string | null): Promise<GateResult>;
  /** The workers' queue for calls scoring the weighted total (null) or one reward, started if need be; closing it leaves them running. */
  calls(reward: string | null): CallQueue;
  close(): Promise<void>;
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

/** What the shim reads to know which reward a request is for. */
const REWARD_KEY = 'gatekept_reward';

function forReward(requests: readonly EvalRequest[], reward: string | null): EvalRequest[] {
  return requests.map((request) => ({ ...request, info: { ...request.info, [REWARD_KEY]: reward } }));
}

/** The shared workers as one gate sees them: its requests name its reward, and closing it leaves them running. */
class RewardQueue implements CallQueue {
  constructor(
    private readonly pool: CallQueue,
    private readonly reward: string | null,
  ) {}
  get info(): VerifierInfo {
    return this.pool.info;
  }
  get isolation(): CallQueue['isolation'] {
    return this.pool.isolation;
  }
  get ready(): Promise<void> {
    return this.pool.ready;
  }
  reserve(expectedRequests: number): void {
    this.pool.reserve(expectedRequests);
  }
  executor(): ExecutorInfo | null {
    return this.pool.executor?.() ?? null;
  }
  evaluate(requests: readonly EvalRequest[], options?: QueueOptions): Promise<EvalResult[]> {
    return this.pool.evaluate(forReward(requests, this.reward), options);
  }
  async close(): Promise<void> {
    // The workers serve the next gate; EnvGates.close() ends them.
  }
}

/** A gate's fresh process, whose requests name the gate's reward. */
function freshFor(session: VerifierSession, reward: string | null): VerifierSession {
  return {
    info: session.info,
    isolation: session.isolation,
    evaluate: (requests, options) => session.evaluate(forReward(requests, reward), options),
    close: () => session.close(),
  };
}

export async function openEnvGates(options: EnvGateOptions): Promise<EnvGates> {
  const dir = await mkdtemp(path.join(tmpdir(), `gatekept-shim-${process.pid}-`));
  const shim = `${path.join(dir, 'env_shim.py')}:reward`;
  let load: EnvLoad | null;
  try {
    await copyEnvShim(dir);
    // The gate makes only the verifier's directory and --pythonpath readable
    // in its workers: local dataset files are copied beside the shim, and the
    // cache directories ride on the import path, which the shim takes them
    // off again before anything imports.
    load = options.load ? await shimLoad(options.load, dir) : null;
    await writeFile(path.join(dir, 'env_shim.json'), JSON.stringify({ spec: options.spec, load: load && loaderConfig(load) }));
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const gateOptions: GateOptions = {
    reward: shim,
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
    ...(options.ray ? { ray: options.ray } : {}),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
  };
  // Started by the first gate. A gate that fails leaves them to nobody: the
  // next gate starts its own, so one reward's failure is not another's.
  let workers: Verifier | null = null;
  const stopWorkers = async (): Promise<void> => {
    const stopping = workers?.calls.close();
    workers = null;
    await stopping?.catch(() => undefined);
  };

  const shared = (checked: CheckedGate): Verifier => {
    workers ??= startPythonVerifier(verifierOptions(gateOptions, checked));
    return workers;
  };

  const gateOne = async (reward: string | null): Promise<GateResult> => {
    const started = performance.now();
    const checked = checkGateOptions(gateOptions);
    const running = shared(checked);
    const verifier: Verifier = {
      calls: new RewardQueue(running.calls, reward),
      openFresh: async () => freshFor(await running.openFresh(), reward),
    };
    return gateStarted(gateOptions, verifier, { started, ...checked.start });
  };

  return {
    async gate(reward) {
      const label = `${options.spec} (${reward === null ? 'weighted total' : `reward ${reward}`})`;
      try {
        const result = await gateOne(reward);
        // The shim's temporary path would make the record differ from run to run; name what was gated instead.
        result.record.verifier.spec = label;
        return result;
      } catch (error) {
        await stopWorkers();
        // Likewise in what went wrong: the user knows the environment, not the shim.
        if (!isGatekeptError(error)) throw error;
        const named = (text: string) => text.split(shim).join(label).split(dir).join('<shim>');
        throw new GatekeptError(error.code, named(error.message), {
          details: error.details.map(named),
          ...(error.suggestion ? { suggestion: named(error.suggestion) } : {}),
          cause: error,
        });
      }
    },
    calls: (reward) => new RewardQueue(shared(checkGateOptions(gateOptions)).calls, reward),
    async close() {
      try {
        await stopWorkers();
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}
