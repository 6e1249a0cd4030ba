/** What a verifier session is opened with, checked and completed with its defaults. */
import { statSync } from 'node:fs';
import path from 'node:path';
import * as z from 'zod';
import { GatekeptError } from '../errors.js';
import { isName, isRecord } from '../hand-check.js';
import { resolvePython } from './resolve-python.js';
import { SANDBOX_MODES, type SandboxMode } from './sandbox.js';
import type { VerifierTarget } from './verifier-spec.js';
import { COMPLETION_FORMATS, type CompletionFormat } from '../types.js';

export interface SessionOptions {
  python: string;
  target: VerifierTarget;
  pythonpath: string[];
  /**
   * Host paths the verifier reads that are not on its import path (files a
   * caller names, a cache), bound read-only beside `pythonpath` (default
   * none). A path that does not exist is left out.
   */
  readable?: string[];
  completionFormat: CompletionFormat;
  callTimeoutMs: number;
  importTimeoutMs: number;
  memoryMb: number;
  /** How much of the worker's stdout and of its stderr to keep for diagnostics. */
  outputCapBytes?: number;
  /** Isolation of the worker (default 'auto': bubblewrap when it works here). */
  sandbox?: SandboxMode;
  /**
   * Warm the verifier up before the first call (default true). The audit's
   * fresh process is not warmed up: its first call is one it chose, not the
   * warm-up's fixed replies, which a verifier could take as the sign of an
   * audit.
   */
  warmUp?: boolean;
}

const DEFAULT_OUTPUT_CAP_BYTES = 64 * 1024;

/**
 * `timeouts.import_ms` bounds the CPU time of the import, which a busy
 * machine does not stretch; the wall clock allows this many times as much,
 * so that only an import that waits instead of working is cut by it (a
 * library that costs 9 s of CPU takes up to a minute on a loaded machine).
 */
export const IMPORT_WALL_FACTOR = 4;

/** Options with every default filled in, paths made absolute and the interpreter resolved. */
export type NormalisedOptions = Required<SessionOptions>;

const buildOptionsSchema = () =>
  z.object({
    python: z.string().min(1),
    target: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('module'), module: z.string().min(1), fn: z.string().min(1) }),
      z.object({ kind: z.literal('file'), path: z.string().min(1), fn: z.string().min(1) }),
    ]),
    pythonpath: z.array(z.string().min(1)),
    readable: z.array(z.string().min(1)).optional(),
    completionFormat: z.enum(COMPLETION_FORMATS),
    callTimeoutMs: z.number().int().positive(),
    importTimeoutMs: z.number().int().positive(),
    memoryMb: z.number().int().nonnegative(),
    outputCapBytes: z.number().int().nonnegative().optional(),
    sandbox: z.enum(SANDBOX_MODES).optional(),
    warmUp: z.boolean().optional(),
  });

type ParsedOptions = z.infer<ReturnType<typeof buildOptionsSchema>>;

let optionsSchemaBuilt: ReturnType<typeof buildOptionsSchema> | undefined;

/** The schema of a session's options, built on first use: only options the hand check refuses need it. */
export function sessionOptionsSchema(): ReturnType<typeof buildOptionsSchema> {
  optionsSchemaBuilt ??= buildOptionsSchema();
  return optionsSchemaBuilt;
}

const isCount = (value: unknown, least: number): value is number => Number.isSafeInteger(value) && (value as number) >= least;

/**
 * What sessionOptionsSchema() gives back for options it accepts (unknown
 * keys dropped), checked by hand, or null for anything else, which zod then
 * describes. Every session's start passes here, and building the schema
 * costs more than the rest of the start before the spawn.
 */
export function checkedSessionOptions(options: unknown): ParsedOptions | null {
  if (!isRecord(options)) return null;
  const target = options.target;
  if (!isRecord(target) || !isName(target.fn)) return null;
  let checkedTarget: ParsedOptions['target'];
  if (target.kind === 'module' && isName(target.module)) checkedTarget = { kind: 'module', module: target.module, fn: target.fn };
  else if (target.kind === 'file' && isName(target.path)) checkedTarget = { kind: 'file', path: target.path, fn: target.fn };
  else return null;
  const { python, pythonpath, readable, completionFormat, callTimeoutMs, importTimeoutMs, memoryMb, outputCapBytes, sandbox, warmUp } = options;
  if (
    !isName(python) ||
    !Array.isArray(pythonpath) ||
    !pythonpath.every(isName) ||
    !(readable === undefined || (Array.isArray(readable) && readable.every(isName))) ||
    !(COMPLETION_FORMATS as readonly unknown[]).includes(completionFormat) ||
    !isCount(callTimeoutMs, 1) ||
    !isCount(importTimeoutMs, 1) ||
    !isCount(memoryMb, 0) ||
    !(outputCapBytes === undefined || isCount(outputCapBytes, 0)) ||
    !(sandbox === undefined || (SANDBOX_MODES as readonly unknown[]).includes(sandbox)) ||
    !(warmUp === undefined || typeof warmUp === 'boolean')
  ) {
    return null;
  }
  return {
    python,
    target: checkedTarget,
    pythonpath: [...pythonpath],
    ...(readable === undefined ? {} : { readable: [...(readable as string[])] }),
    completionFormat: completionFormat as ParsedOptions['completionFormat'],
    callTimeoutMs,
    importTimeoutMs,
    memoryMb,
    ...(outputCapBytes === undefined ? {} : { outputCapBytes }),
    ...(sandbox === undefined ? {} : { sandbox: sandbox as SandboxMode }),
    ...(warmUp === undefined ? {} : { warmUp }),
  };
}

export function normaliseOptions(options: SessionOptions): NormalisedOptions {
  let value = checkedSessionOptions(options);
  if (value === null) {
    const parsed = sessionOptionsSchema().safeParse(options);
    if (!parsed.success) {
      throw new GatekeptError('BAD_ARGUMENT', 'invalid verifier session options', {
        details: parsed.error.issues.map((issue) => `${issue.path.join('.') || '(options)'}: ${issue.message}`),
      });
    }
    value = parsed.data;
  }
  for (const entry of value.pythonpath) {
    try {
      statSync(path.resolve(entry));
    } catch {
      throw new GatekeptError('BAD_ARGUMENT', `import path ${entry} does not exist`, {
        suggestion: 'check the --pythonpath directories',
      });
    }
  }
  const target: VerifierTarget = value.target.kind === 'file' ? { ...value.target, path: path.resolve(value.target.path) } : value.target;
  return {
    ...value,
    python: resolvePython(value.python),
    target,
    pythonpath: value.pythonpath.map((entry) => path.resolve(entry)),
    readable: (value.readable ?? []).map((entry) => path.resolve(entry)),
    outputCapBytes: value.outputCapBytes ?? DEFAULT_OUTPUT_CAP_BYTES,
    sandbox: value.sandbox ?? 'auto',
    warmUp: value.warmUp ?? true,
  };
}
