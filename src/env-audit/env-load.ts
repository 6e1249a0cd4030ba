import { existsSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { GatekeptError } from '../errors.js';

/**
 * How an environment is loaded beyond its id: keyword arguments for its
 * loader, datasets it loads by name served from local files, and the user's
 * Hugging Face cache, read offline and read-only. The same settings reach the
 * process that inspects the environment and the gate's workers that score
 * through it (as JSON the loader reads), so both see the same rows.
 */

export interface HfCacheDirs {
  /** Prepared datasets (`HF_DATASETS_CACHE`, by default `$HF_HOME/datasets`). */
  datasets: string | null;
  /** Hub downloads (`HF_HUB_CACHE`, by default `$HF_HOME/hub`). */
  hub: string | null;
}

export interface EnvLoad {
  /** Keyword arguments for `load_environment(**args)` (0.3) or the Taskset's config (0.4). */
  envArgs: Record<string, unknown>;
  /** Dataset name (as passed to `datasets.load_dataset`) -> absolute path of a local file. */
  datasets: Record<string, string>;
  hf: HfCacheDirs;
  /**
   * The most rows the loader reads (its own default, 100,000, when unset).
   * Internal: gatekept's tests lower it to audit a taskset larger than the cap cheaply.
   */
  maxRows?: number;
}

/** The suffixes `datasets` reads a local file by: the loader picks the builder from it. */
const DATASET_FILE_SUFFIXES = ['.jsonl', '.json', '.csv', '.parquet'] as const;

function existingDir(dir: string | undefined): string | null {
  if (!dir) return null;
  try {
    return statSync(dir).isDirectory() ? path.resolve(dir) : null;
  } catch {
    return null;
  }
}

/**
 * The user's cache as the Hugging Face libraries find it. Only the datasets
 * and hub directories are used, never HF_HOME as a whole: it holds the
 * user's token, which the environment's code must not read.
 */
export function userHfCache(env: NodeJS.ProcessEnv = process.env): HfCacheDirs {
  const home = env.HF_HOME || path.join(env.XDG_CACHE_HOME || path.join(homedir(), '.cache'), 'huggingface');
  return {
    datasets: existingDir(env.HF_DATASETS_CACHE || path.join(home, 'datasets')),
    hub: existingDir(env.HF_HUB_CACHE || env.HUGGINGFACE_HUB_CACHE || path.join(home, 'hub')),
  };
}

/** `--hf-cache DIR`: a directory laid out like HF_HOME (datasets/, hub/). */
export function hfCacheAt(dir: string): HfCacheDirs {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new GatekeptError('FILE_NOT_FOUND', `no Hugging Face cache directory at ${dir}`, {
      suggestion: 'pass the directory HF_HOME points to (it holds datasets/ and hub/), or leave --hf-cache out to use your own cache',
    });
  }
  const found = { datasets: existingDir(path.join(dir, 'datasets')), hub: existingDir(path.join(dir, 'hub')) };
  if (found.datasets === null && found.hub === null) {
    throw new GatekeptError('BAD_ARGUMENT', `${dir} holds neither datasets/ nor hub/, so it is no Hugging Face cache`, {
      suggestion: 'pass the directory HF_HOME points to (by default ~/.cache/huggingface)',
    });
  }
  return found;
}

/** `--env-args '{"k": v}'`: a JSON object, as vf-eval takes it. */
export function parseEnvArgs(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new GatekeptError('BAD_ARGUMENT', `--env-args is not JSON: ${(error as Error).message}`, {
      suggestion: `give a JSON object, e.g. --env-args '{"num_eval_examples": 100}'`,
    });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new GatekeptError('BAD_ARGUMENT', `--env-args must be a JSON object, not ${JSON.stringify(value)}`, {
      suggestion: `give a JSON object, e.g. --env-args '{"num_eval_examples": 100}'`,
    });
  }
  return value as Record<string, unknown>;
}

/**
 * `--local-dataset NAME=FILE` (repeatable): the name exactly as the environment
 * passes it to `datasets.load_dataset` (e.g. `openai/gsm8k`), the file a
 * local JSONL, JSON, CSV or Parquet file. The last `=` splits, so a name may
 * hold one; a file name may not.
 */
export function parseDatasetFiles(entries: readonly string[], cwd: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of entries) {
    const split = entry.lastIndexOf('=');
    const name = split > 0 ? entry.slice(0, split).trim() : '';
    const file = split > 0 ? entry.slice(split + 1).trim() : '';
    if (name === '' || file === '') {
      throw new GatekeptError('BAD_ARGUMENT', `--local-dataset ${JSON.stringify(entry)} is not NAME=FILE`, {
        suggestion: 'name the dataset as the environment loads it and a local file, e.g. --local-dataset openai/gsm8k=gsm8k-test.jsonl',
      });
    }
    const absolute = path.resolve(cwd, file);
    if (!existsSync(absolute) || !statSync(absolute).isFile()) {
      throw new GatekeptError('FILE_NOT_FOUND', `--local-dataset ${name}: no file at ${absolute}`, {
        suggestion: 'give an existing JSONL, JSON, CSV or Parquet file',
      });
    }
    if (!DATASET_FILE_SUFFIXES.some((suffix) => absolute.toLowerCase().endsWith(suffix))) {
      throw new GatekeptError('BAD_ARGUMENT', `--local-dataset ${name}: cannot tell the format of ${path.basename(absolute)}`, {
        suggestion: `give a file ending in ${DATASET_FILE_SUFFIXES.join(', ')}`,
      });
    }
    if (name in out && out[name] !== absolute) {
      throw new GatekeptError('BAD_ARGUMENT', `--local-dataset ${name} is given twice, with different files`, { suggestion: 'give each dataset name once' });
    }
    out[name] = absolute;
  }
  return out;
}

/** The directories the environment's code must be able to read, for the sandbox's read-only binds. */
export function readablePaths(load: EnvLoad): string[] {
  return [...Object.values(load.datasets), ...(load.hf.datasets ? [load.hf.datasets] : []), ...(load.hf.hub ? [load.hf.hub] : [])];
}

/** What python/env_loader.py reads (see its `load_options`). */
export function loaderConfig(load: EnvLoad): Record<string, unknown> {
  return {
    env_args: load.envArgs,
    datasets: load.datasets,
    hf_datasets_cache: load.hf.datasets,
    hf_hub_cache: load.hf.hub,
    ...(load.maxRows !== undefined ? { max_rows: load.maxRows } : {}),
  };
}
