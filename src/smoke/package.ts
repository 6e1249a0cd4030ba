import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import * as z from 'zod';
import { DATA_FILE_NAME, VERIFIER_FILE_NAME, moduleName } from '../pack/environment-spec.js';
import { GatekeptError } from '../errors.js';
import { type Row, readJsonl } from '../rows.js';
import type { SmokeTarget } from './report.js';

/** The package under smoke: its layout, its bundled rows, and what its pyproject.toml pins. */

export interface PackageInfo {
  target: SmokeTarget;
  dir: string;
  envId: string;
  module: string;
  /** `module:attribute` of the ASGI app, relative to the package directory. */
  app: string;
  dataFile: string;
  verifierFile: string;
  /** Where the package states its answer format. */
  environmentFile: string;
}

export type DataRow = Pick<Row, 'question' | 'answer'>;

const ENV_ID = /^[a-z][a-z0-9-]*$/;

async function isFile(file: string): Promise<boolean> {
  return stat(file).then(
    (info) => info.isFile(),
    () => false,
  );
}

function notAPackage(dir: string, target: SmokeTarget, why: string): GatekeptError {
  const kind = target === 'openenv' ? 'an OpenEnv' : 'a verifiers';
  return new GatekeptError('BAD_ARGUMENT', `${dir} is not ${kind} package emitted by gatekept: ${why}`, {
    suggestion:
      target === 'openenv'
        ? 'pass the directory `gatekept pack` wrote, e.g. --openenv out/openenv/<env_id>'
        : 'pass the directory `gatekept pack` wrote, e.g. --verifiers out/verifiers/<env_id>',
  });
}

export async function resolvePackage(target: SmokeTarget, dir: string): Promise<PackageInfo> {
  const info = await stat(dir).catch(() => null);
  if (!info) {
    throw new GatekeptError('FILE_NOT_FOUND', `no such directory: ${dir}`, {
      suggestion: `pass the package directory \`gatekept pack\` wrote under <out>/${target}/`,
    });
  }
  if (!info.isDirectory()) throw notAPackage(dir, target, 'it is not a directory');
  if (target === 'openenv') {
    const manifest = await readFile(path.join(dir, 'openenv.yaml'), 'utf8').catch(() => null);
    if (manifest === null) throw notAPackage(dir, target, 'it has no openenv.yaml');
    const envId = /^name:\s*["']?([^"'\s#]+)["']?\s*$/m.exec(manifest)?.[1];
    const app = /^app:\s*["']?([^"'\s#]+)["']?\s*$/m.exec(manifest)?.[1] ?? 'server.app:app';
    if (!envId || !ENV_ID.test(envId)) throw notAPackage(dir, target, 'openenv.yaml names no environment id');
    const module = moduleName(envId);
    const files = {
      dataFile: path.join(dir, 'server', DATA_FILE_NAME),
      verifierFile: path.join(dir, 'server', VERIFIER_FILE_NAME),
      environmentFile: path.join(dir, 'server', `${module}_environment.py`),
    };
    for (const file of [path.join(dir, 'server', 'app.py'), path.join(dir, 'models.py'), ...Object.values(files)]) {
      if (!(await isFile(file))) throw notAPackage(dir, target, `${path.relative(dir, file)} is missing`);
    }
    return { target, dir, envId, module, app, ...files };
  }
  const pyproject = await readFile(path.join(dir, 'pyproject.toml'), 'utf8').catch(() => null);
  if (pyproject === null) throw notAPackage(dir, target, 'it has no pyproject.toml');
  let envId: unknown;
  try {
    envId = (parseToml(pyproject) as { project?: { name?: unknown } }).project?.name;
  } catch {
    throw notAPackage(dir, target, 'its pyproject.toml does not parse');
  }
  if (typeof envId !== 'string' || !ENV_ID.test(envId)) throw notAPackage(dir, target, 'pyproject.toml names no environment id');
  const module = moduleName(envId);
  // A verifiers 0.4 package defines its Taskset in taskset.py; a classic one
  // its load_environment() in a file named after the module.
  const tasksetFile = path.join(dir, module, 'taskset.py');
  const files = {
    dataFile: path.join(dir, module, DATA_FILE_NAME),
    verifierFile: path.join(dir, module, VERIFIER_FILE_NAME),
    environmentFile: (await isFile(tasksetFile)) ? tasksetFile : path.join(dir, module, `${module}.py`),
  };
  for (const file of [path.join(dir, module, '__init__.py'), ...Object.values(files)]) {
    if (!(await isFile(file))) throw notAPackage(dir, target, `${path.relative(dir, file)} is missing`);
  }
  return { target, dir, envId, module, app: '', ...files };
}

export async function readRows(pkg: PackageInfo): Promise<DataRow[]> {
  const where = path.relative(pkg.dir, pkg.dataFile);
  const lines = await readJsonl(pkg.dataFile, z.object({ question: z.string(), answer: z.string() }), {
    what: 'data file',
    shownAs: where,
    suggestion: 'pass the package directory `gatekept pack` wrote, unchanged',
    invalid: (line) => notAPackage(pkg.dir, pkg.target, `line ${line} of ${where} lacks a string question and answer`),
  }).catch((error: unknown) => {
    if (error instanceof GatekeptError && error.code === 'BAD_DATASET') throw notAPackage(pkg.dir, pkg.target, error.message);
    throw error;
  });
  return lines.map(({ value }) => value);
}

/**
 * The version range a package's pyproject.toml pins for a dependency
 * (`>=0.4,<0.5` of `"verifiers>=0.4,<0.5"`), or null when it pins none.
 */
export async function pinnedRequirement(dir: string, name: string): Promise<string | null> {
  const pyproject = await readFile(path.join(dir, 'pyproject.toml'), 'utf8').catch(() => '');
  const found = new RegExp(`["']${name}\\s*((?:[<>=!~]=?\\s*[\\w.]+\\s*,?\\s*)+)["']`).exec(pyproject);
  return found ? found[1]!.replace(/\s+/g, '') : null;
}

/**
 * Whether a version meets comma-separated clauses of ==, !=, >=, <=, > and
 * < (what emitted packages pin); release numbers compared part by part.
 */
export function satisfies(version: string, clauses: string): boolean {
  const parts = (text: string) => text.split('.').map((part) => Number.parseInt(part, 10) || 0);
  const compare = (a: number[], b: number[]) => {
    for (let index = 0; index < Math.max(a.length, b.length); index += 1) {
      const difference = (a[index] ?? 0) - (b[index] ?? 0);
      if (difference !== 0) return Math.sign(difference);
    }
    return 0;
  };
  const have = parts(version);
  return clauses.split(',').every((clause) => {
    const match = /^(==|!=|>=|<=|>|<)([\w.]+)$/.exec(clause);
    if (!match) return false;
    const order = compare(have, parts(match[2]!));
    switch (match[1]) {
      case '==':
        return order === 0;
      case '!=':
        return order !== 0;
      case '>=':
        return order >= 0;
      case '<=':
        return order <= 0;
      case '>':
        return order > 0;
      default:
        return order < 0;
    }
  });
}
