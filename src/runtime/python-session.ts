/**
 * The one owner of the Python worker that runs a verifier.
 *
 * The worker reads requests on its fd 3 and answers on fd 4, so whatever the
 * verifier prints on stdout/stderr never mixes with replies. Hangs the worker
 * cannot interrupt itself and crashes are handled here by killing its process
 * group and starting a fresh worker.
 */
import { rmSync, statSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Writable } from 'node:stream';
import * as z from 'zod';
import { GatekeptError } from '../errors.js';
import { isName, isRecord, isText } from '../hand-check.js';
import { HARNESS_PATH } from '../paths.js';
import { liveDirRegistry } from './cleanup.js';
import { escapeControl, escapeLine } from './escape-control.js';
import { describeExit, LineFramer, PythonProcess, tailLines, waitFor, type ExitInfo } from './python-process.js';
import { probePython, resolvePython } from './resolve-python.js';
import { hopedLaunch, hopedSandbox, openSandbox, sameSandbox, SANDBOX_HOME, SANDBOX_MODES, SANDBOX_TMP, type Sandbox, type SandboxLayout, type SandboxMode } from './sandbox.js';
import { makeWorkDir } from './stale-dirs.js';
import { COMPLETION_FORMATS, type CompletionFormat } from '../types.js';
import { verifierTraceback } from '../report/verifier-traceback.js';

export type VerifierTarget =
  | { kind: 'module'; module: string; fn: string }
  | { kind: 'file'; path: string; fn: string };

export const SIDE_EFFECT_KINDS = [
  'file_created',
  'file_write_blocked',
  'env_changed',
  'network_blocked',
  'subprocess_blocked',
  'kill_blocked',
  'file_read_blocked',
  'subprocess_started',
  /** A child process the verifier started (allowed, killed when the call ends). */
  'process',
  'exit_attempt',
  'output',
] as const;
export type SideEffectKind = (typeof SIDE_EFFECT_KINDS)[number];

export interface SessionOptions {
  python: string;
  target: VerifierTarget;
  pythonpath: string[];
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

export interface EvalRequest {
  completion: string;
  answer: string;
  prompt?: string | null;
  info?: Record<string, unknown>;
}

export interface EvaluateOptions {
  /**
   * Stop at the first call that times out or takes the worker down: the rest
   * of the batch is skipped instead of costing one timeout or restart each.
   */
  stopOnTimeout?: boolean;
  /**
   * Asked before the batch starts and before a worker is restarted for it:
   * true skips what is left (the caller stopped, say at another batch's
   * timeout, while this one waited its turn).
   */
  cancelled?: () => boolean;
}

export interface EvalResult {
  /** `skipped`: never run, because the audit had already stopped (see stopOnTimeout). */
  status: 'ok' | 'raised' | 'timeout' | 'exit' | 'crashed' | 'skipped';
  reward: number | null;
  /** Python type name of the returned value; '' when nothing was returned. */
  rewardType: string;
  nonFinite: 'nan' | 'inf' | '-inf' | null;
  error: { type: string; message: string } | null;
  sideEffects: { kind: SideEffectKind; detail: string }[];
  ms: number;
  /** CPU time the call used in the worker process (all its threads), when the worker measured it. */
  cpuMs?: number;
  /**
   * A time limit of the verifier's own expired during the call (a handler it
   * set for SIGALRM, SIGVTALRM or SIGPROF ran; a future's result or a thread's
   * join ran out of time): on a slower moment the same input may score otherwise.
   */
  ownTimer?: boolean;
}

export interface VerifierInfo {
  params: string[];
  varKwargs: boolean;
  isAsync: boolean;
  pythonVersion: string;
  /** The file the harness loaded the verifier from, and the sha256 of its bytes, read before any of its code ran. */
  sourceFile: string | null;
  sha256: string | null;
  importMs: number;
}

export interface VerifierSession {
  readonly info: VerifierInfo;
  /** How the worker is isolated: 'bwrap' (namespaces) or 'none' (the in-process guard only). */
  readonly isolation: Sandbox['kind'];
  evaluate(requests: readonly EvalRequest[], options?: EvaluateOptions): Promise<EvalResult[]>;
  close(): Promise<void>;
}

const DEFAULT_OUTPUT_CAP_BYTES = 64 * 1024;
/** Slack on top of the call timeout before a silent worker is presumed stuck. */
const CALL_GRACE_MS = 1000;
/** The worker times its own import out first, so it can say where it hung. */
const IMPORT_GRACE_MS = 1000;
/**
 * `timeouts.import_ms` bounds the CPU time of the import, which a busy
 * machine does not stretch; the wall clock allows this many times as much,
 * so that only an import that waits instead of working is cut by it (a
 * library that costs 9 s of CPU takes up to a minute on a loaded machine).
 */
export const IMPORT_WALL_FACTOR = 4;
/**
 * After the import the worker warms the verifier up with a few calls (see
 * _warm_up in python/harness.py), within one call timeout in all; a warm-up
 * that kills or hangs the worker is given up after that and a second of
 * slack, and the worker is started again, importing the verifier once more,
 * without one.
 */
function readyDeadlineMs(importTimeoutMs: number, callTimeoutMs: number): number {
  const importWallMs = importTimeoutMs * IMPORT_WALL_FACTOR;
  return 2 * importWallMs + callTimeoutMs + 1000 + IMPORT_GRACE_MS;
}
const MAX_RESTARTS = 50;
const KILL_WAIT_MS = 3000;
/** How long an unsandboxed supervisor gets to sweep what the verifier left running. */
const SWEEP_WAIT_MS = 2000;
/** After the worker exits, replies it already wrote may still be in flight. */
const REPLY_DRAIN_MS = 1000;
const WRITE_CHUNK_CHARS = 64 * 1024;
const STDERR_TAIL_LINES = 20;
const TRACEBACK_TAIL_LINES = 12;

// ---------------------------------------------------------------- verifier spec

const PY_IDENTIFIER = /^[\p{L}_][\p{L}\p{N}_]*$/u;
const SPEC_FORMS = "expected 'package.module:function' or 'path/to/file.py:function'";

function isDottedName(value: string): boolean {
  return value.length > 0 && value.split('.').every((part) => PY_IDENTIFIER.test(part));
}

export function parseVerifierSpec(spec: string, cwd: string): VerifierTarget {
  const colon = spec.lastIndexOf(':');
  const where = colon > 0 ? spec.slice(0, colon).trim() : '';
  const fn = colon > 0 ? spec.slice(colon + 1).trim() : '';
  if (!where || !fn) {
    throw new GatekeptError('BAD_ARGUMENT', `verifier '${spec}' is malformed; ${SPEC_FORMS}`);
  }
  if (!isDottedName(fn)) {
    throw new GatekeptError(
      'BAD_ARGUMENT',
      `'${fn}' in verifier '${spec}' is not a Python function name; ${SPEC_FORMS}`,
    );
  }
  const looksLikePath = where.endsWith('.py') || where.includes('/') || where.includes(path.sep);
  if (!looksLikePath) {
    if (!isDottedName(where)) {
      throw new GatekeptError(
        'BAD_ARGUMENT',
        `'${where}' in verifier '${spec}' is neither a module name nor a .py file; ${SPEC_FORMS}`,
      );
    }
    return { kind: 'module', module: where, fn };
  }
  if (!where.endsWith('.py')) {
    throw new GatekeptError(
      'BAD_ARGUMENT',
      `'${where}' in verifier '${spec}' looks like a path but does not end in .py; ${SPEC_FORMS}`,
    );
  }
  const absolute = path.resolve(cwd, where);
  let isFile = false;
  try {
    isFile = statSync(absolute).isFile();
  } catch {
    throw new GatekeptError('VERIFIER_NOT_FOUND', `verifier file ${where} does not exist`, {
      suggestion: 'check the path; relative paths are taken from the current directory',
    });
  }
  if (!isFile) {
    throw new GatekeptError('VERIFIER_NOT_FOUND', `verifier path ${where} is not a file`);
  }
  return { kind: 'file', path: absolute, fn };
}

// -------------------------------------------------------------------- protocol

const RESULT_STATUSES: ReadonlySet<string> = new Set(['ok', 'raised', 'timeout', 'exit']);
const NON_FINITE: ReadonlySet<string> = new Set(['nan', 'inf', '-inf']);
const EFFECT_KINDS: ReadonlySet<string> = new Set(SIDE_EFFECT_KINDS);

/**
 * What one reply line from the worker says. The worker's replies are JSON
 * lists; JSON objects come from the supervisor, the process that talks to
 * gatekept and never runs verifier code (see python/harness.py).
 */
type WorkerReply =
  | { op: 'result'; id: number; result: EvalResult }
  /** The worker could not handle a request (the harness's own error). */
  | { op: 'error'; message: string }
  /** The supervisor found processes still running while the worker was idle, and killed them. */
  | { op: 'strays' }
  /** The supervisor found what the calls left in the worker's home, and removed it. */
  | { op: 'files'; effects: EvalResult['sideEffects'] }
  /** The supervisor caught the worker writing what only the supervisor may write. */
  | { op: 'tampered'; message: string };


/**
 * Checked by hand rather than with a schema: this runs once per verifier
 * call, and a schema parse costs more than the rest of the reply's handling.
 */
function readResult(value: unknown[], line: string): { id: number; result: EvalResult } {
  const [id, status, reward, rewardType, nonFinite, error, effects, ms, cpuMs, ownTimer] = value;
  const bad = (what: string): never => {
    throw protocolError(what, line);
  };
  if (value.length !== 10) bad(`a result has 10 fields, not ${value.length}`);
  if (!Number.isInteger(id)) bad('the id is not an integer');
  if (!isText(status) || !RESULT_STATUSES.has(status)) bad('unknown status');
  if (reward !== null && typeof reward !== 'number') bad('the reward is neither a number nor null');
  if (!isText(rewardType)) bad('the reward type is not a string');
  if (nonFinite !== null && !(isText(nonFinite) && NON_FINITE.has(nonFinite))) bad('unknown non-finite tag');
  if (error !== null && !(Array.isArray(error) && error.length === 2 && isText(error[0]) && isText(error[1]))) {
    bad('the error is not [type, message]');
  }
  if (!Array.isArray(effects)) bad('the side effects are not a list');
  const sideEffects: EvalResult['sideEffects'] = [];
  for (const effect of effects as unknown[]) {
    if (!(Array.isArray(effect) && effect.length === 2 && isText(effect[0]) && EFFECT_KINDS.has(effect[0]) && isText(effect[1]))) {
      return bad('a side effect is not [kind, detail]');
    }
    sideEffects.push({ kind: effect[0] as SideEffectKind, detail: escapeLine(effect[1]) });
  }
  if (typeof ms !== 'number') bad('the call time is not a number');
  if (typeof cpuMs !== 'number') bad('the CPU time is not a number');
  if (typeof ownTimer !== 'boolean') bad("the verifier's own timer flag is not a boolean");
  const failure = error as [string, string] | null;
  return {
    id: id as number,
    result: {
      status: status as EvalResult['status'],
      reward: reward as number | null,
      rewardType: escapeLine(rewardType as string),
      nonFinite: nonFinite as EvalResult['nonFinite'],
      error: failure ? { type: escapeLine(failure[0]), message: escapeLine(failure[1]) } : null,
      sideEffects,
      ms: ms as number,
      cpuMs: cpuMs as number,
      ownTimer: ownTimer as boolean,
    },
  };
}

function readReply(line: string): WorkerReply {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw protocolError('not JSON', line);
  }
  if (Array.isArray(value)) {
    if (value[0] === 'error') {
      if (value.length !== 2 || !isText(value[1])) throw protocolError('malformed error', line);
      return { op: 'error', message: value[1] };
    }
    return { op: 'result', ...readResult(value, line) };
  }
  // The supervisor writes its objects compactly, from their first byte; a
  // line that only parses as one (after white space, say) is not its own.
  if (!line.startsWith('{"op":')) throw protocolError('unknown message', line);
  const message = value as { op?: unknown; message?: unknown } | null;
  if (message?.op === 'strays') return { op: 'strays' };
  if (message?.op === 'files') return { op: 'files', effects: filesCreated(value, line) };
  if (message?.op === 'error' && isText(message.message)) return { op: 'tampered', message: message.message };
  throw protocolError('unknown message', line);
}

/** How many entries of a worker's home the supervisor lists after each batch (HOME_ENTRIES_CHECKED in harness.py). */
const HOME_ENTRIES_CHECKED = 10_000;

/** The side effects of the supervisor's look at the worker's home after a batch. */
function filesCreated(value: unknown, line: string): EvalResult['sideEffects'] {
  const { created, more, unchecked } = value as { created?: unknown; more?: unknown; unchecked?: unknown };
  if (!Array.isArray(created) || !created.every(isText) || !Number.isInteger(more) || typeof unchecked !== 'boolean') {
    throw protocolError('malformed files message', line);
  }
  return [
    ...created.map((name) => ({ kind: 'file_created' as const, detail: `${escapeLine(name)} (found by gatekept after the calls)` })),
    ...((more as number) > 0 ? [{ kind: 'file_created' as const, detail: `${more as number} more new entries in the working directory` }] : []),
    ...(unchecked ? [{ kind: 'file_created' as const, detail: `the working directory holds ${HOME_ENTRIES_CHECKED} entries or more, too many for gatekept to check after the calls` }] : []),
  ];
}

/** Side effect attached when the supervisor had to kill what the verifier left running. */
const STRAY_EFFECT = {
  kind: 'process',
  detail: 'a process was still running after the calls (found and killed by the supervisor)',
} as const;

const LOAD_ERROR_KINDS = [
  'module_not_found',
  'file_not_found',
  'syntax_error',
  'import_error',
  'attribute_error',
  'not_callable',
  'python_too_old',
  'import_timeout',
] as const;

/*
 * Built when the first worker answers (see parseReply), not while the CLI
 * starts: constructing zod schemas is a visible share of start-up.
 */
const loadErrorSchema = () =>
  z.object({
    kind: z.enum(LOAD_ERROR_KINDS),
    type: z.string(),
    message: z.string(),
    traceback: z.string(),
  });
type LoadError = z.infer<ReturnType<typeof loadErrorSchema>>;

/** The supervisor writes these two fields itself (see provenance in harness.py); anything else is refused. */
const PYTHON_VERSION = /^\d{1,3}\.\d{1,3}\.\d{1,3}$/;
const SHA256 = /^[0-9a-f]{64}$/;

const buildReadyReplySchema = () =>
  z.union([
    z.object({
      op: z.literal('ready'),
      ok: z.literal(true),
      params: z.array(z.string()),
      var_kwargs: z.boolean(),
      is_async: z.boolean(),
      python: z.string().regex(PYTHON_VERSION),
      source_file: z.string().nullable(),
      sha256: z.string().regex(SHA256).nullable(),
      import_ms: z.number(),
    }),
    z.object({ op: z.literal('ready'), ok: z.literal(false), error: loadErrorSchema() }),
    z.object({ op: z.literal('error'), message: z.string() }),
  ]);

let readyReplyBuilt: ReturnType<typeof buildReadyReplySchema> | undefined;

export function readyReplySchema(): ReturnType<typeof buildReadyReplySchema> {
  readyReplyBuilt ??= buildReadyReplySchema();
  return readyReplyBuilt;
}

type ReadyReply = z.output<ReturnType<typeof buildReadyReplySchema>>;

/**
 * A worker that imported the verifier, as readyReplySchema() reads its
 * reply, checked by hand; null for any other reply, which the schema reads
 * (a failed import, a broken reply). Every worker's start waits on this, and
 * building the schema costs more than the check.
 */
export function checkedReadyReply(reply: unknown): ReadyReply | null {
  if (!isRecord(reply)) return null;
  const { params, var_kwargs, is_async, python, source_file, sha256, import_ms } = reply;
  if (reply.op !== 'ready' || reply.ok !== true) return null;
  if (!Array.isArray(params) || !params.every(isText) || typeof var_kwargs !== 'boolean' || typeof is_async !== 'boolean') return null;
  if (!isText(python) || !PYTHON_VERSION.test(python) || !(source_file === null || isText(source_file))) return null;
  if (!(sha256 === null || (isText(sha256) && SHA256.test(sha256))) || typeof import_ms !== 'number' || !Number.isFinite(import_ms)) return null;
  return { op: 'ready', ok: true, params: [...params], var_kwargs, is_async, python, source_file, sha256, import_ms };
}

function protocolError(problem: string, line: string): GatekeptError {
  return new GatekeptError('HARNESS_PROTOCOL', `the Python harness sent an invalid reply: ${problem}`, {
    details: [`reply: ${line.length > 300 ? `${line.slice(0, 300)}...` : line}`],
    suggestion: 'this is a bug in gatekept; please report it with the verifier that triggered it',
  });
}

function tampered(message: string, line: string): GatekeptError {
  return new GatekeptError('HARNESS_PROTOCOL', `the verifier broke gatekept's reply protocol: ${escapeLine(message)}`, {
    details: [`reply: ${line.length > 300 ? `${line.slice(0, 300)}...` : line}`],
    suggestion: 'the verifier (or something it started) wrote to the channel gatekept reads results from; such a verifier cannot be audited',
  });
}

/**
 * `schema` builds (or returns the built) schema: see readyReplySchema. Each
 * worker sends one such reply, too few for zod's compiled fast path to pay
 * for compiling it.
 */
function parseReply<T>(schema: () => z.ZodType<T>, line: string): T {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw protocolError('not JSON', line);
  }
  const parsed = schema().safeParse(value, { jitless: true });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
    throw protocolError(`${where}${issue?.message ?? 'unexpected shape'}`, line);
  }
  return parsed.data;
}

// ---------------------------------------------------------------------- worker

interface WorkerHandlers {
  lines: (lines: string[]) => void;
  exit: (info: ExitInfo) => void;
}

/** The harness process plus the request/reply protocol around it. */
class Worker {
  exitInfo: ExitInfo | null = null;
  /** What this worker process remembers of long completions (see LongTextCodec). */
  readonly longTexts = new LongTextCodec();
  readonly done: Promise<ExitInfo>;

  private backlog: string[] = [];
  private handlers: WorkerHandlers | null = null;
  private processExit: ExitInfo | null = null;
  private repliesClosed = false;
  private resolveDone!: (info: ExitInfo) => void;
  private readonly requests: Writable;

  private constructor(
    readonly proc: PythonProcess,
    private readonly sandboxed: boolean,
  ) {
    this.requests = proc.requests!;
    const replies = proc.replies!;
    this.done = new Promise((resolve) => {
      this.resolveDone = resolve;
    });
    const framer = new LineFramer((lines) => {
      if (this.handlers) this.handlers.lines(lines);
      else this.backlog.push(...lines);
    });
    replies.setEncoding('utf8');
    replies.on('data', (chunk: string) => framer.push(chunk));
    replies.on('close', () => {
      this.repliesClosed = true;
      this.maybeFinish();
    });
    void proc.exited.then((info) => {
      this.processExit = info;
      setTimeout(() => {
        this.repliesClosed = true;
        this.maybeFinish();
      }, REPLY_DRAIN_MS).unref();
      this.maybeFinish();
    });
    // An idle session must not keep Node alive; the exit hook cleans up.
    proc.unref();
  }

  static async start(options: NormalisedOptions, launch: WorkerLaunch): Promise<Worker> {
    const proc = await PythonProcess.start({
      python: options.python,
      args: [launch.harness],
      cwd: launch.cwd,
      env: launch.env,
      protocol: true,
      outputCapBytes: options.outputCapBytes,
      minimumVersion: '3.10',
      ...(launch.sandbox ? { sandbox: launch.sandbox } : {}),
    });
    return new Worker(proc, launch.sandbox !== null);
  }

  get stdout(): PythonProcess['stdout'] {
    return this.proc.stdout;
  }

  get stderr(): PythonProcess['stderr'] {
    return this.proc.stderr;
  }

  get exited(): boolean {
    return this.processExit !== null;
  }

  /** Lines read by a handler that were not its own: they belong to the next one. */
  giveBack(lines: string[]): void {
    if (lines.length > 0) this.backlog.unshift(...lines);
  }

  setHandlers(handlers: WorkerHandlers | null): void {
    this.handlers = handlers;
    if (!handlers) return;
    if (this.backlog.length > 0) {
      const lines = this.backlog;
      this.backlog = [];
      handlers.lines(lines);
    }
    if (this.exitInfo && this.handlers === handlers) handlers.exit(this.exitInfo);
  }

  /** Returns false when the pipe is full; wait for drain() before writing more. */
  write(data: string): boolean {
    if (this.processExit || this.requests.destroyed) return false;
    return this.requests.write(data);
  }

  drain(): Promise<void> {
    if (this.processExit || this.requests.destroyed || !this.requests.writableNeedDrain) {
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const finish = (): void => {
        this.requests.off('drain', finish);
        this.requests.off('close', finish);
        resolve();
      };
      this.requests.on('drain', finish);
      this.requests.on('close', finish);
      void this.done.then(finish);
    });
  }

  /** SIGKILL the whole process group (the sandbox): the worker and anything it started. */
  kill(): void {
    this.proc.kill();
  }

  async stop(): Promise<void> {
    // Without the sandbox, what the verifier started in a session of its own
    // is outside the process group: the supervisor, its subreaper, sweeps it
    // once its requests end, before the group is killed.
    if (!this.sandboxed && !this.exited) {
      this.requests.end();
      await waitFor(this.done, SWEEP_WAIT_MS);
    }
    // In the sandbox nothing needs an orderly exit: killing the whole group at
    // once is faster, and the sandbox takes everything in it along.
    this.kill();
    await waitFor(this.done, KILL_WAIT_MS);
  }

  private maybeFinish(): void {
    if (this.exitInfo || !this.processExit || !this.repliesClosed) return;
    this.exitInfo = this.processExit;
    this.resolveDone(this.exitInfo);
    this.handlers?.exit(this.exitInfo);
  }
}

interface WorkerLaunch {
  /** The harness: compiled by this interpreter when it could be (see runtime-cache.ts), else its source. */
  harness: string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  sandbox: { sandbox: Sandbox; layout: SandboxLayout } | null;
}

const withTimeout = waitFor;
// --------------------------------------------------------------------- session

type NormalisedOptions = Required<SessionOptions>;

const buildOptionsSchema = () =>
  z.object({
    python: z.string().min(1),
    target: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('module'), module: z.string().min(1), fn: z.string().min(1) }),
      z.object({ kind: z.literal('file'), path: z.string().min(1), fn: z.string().min(1) }),
    ]),
    pythonpath: z.array(z.string().min(1)),
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
  const { python, pythonpath, completionFormat, callTimeoutMs, importTimeoutMs, memoryMb, outputCapBytes, sandbox, warmUp } = options;
  if (
    !isName(python) ||
    !Array.isArray(pythonpath) ||
    !pythonpath.every(isName) ||
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
    completionFormat: completionFormat as ParsedOptions['completionFormat'],
    callTimeoutMs,
    importTimeoutMs,
    memoryMb,
    ...(outputCapBytes === undefined ? {} : { outputCapBytes }),
    ...(sandbox === undefined ? {} : { sandbox: sandbox as SandboxMode }),
    ...(warmUp === undefined ? {} : { warmUp }),
  };
}

function normaliseOptions(options: SessionOptions): NormalisedOptions {
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
  const target: VerifierTarget =
    value.target.kind === 'file' ? { ...value.target, path: path.resolve(value.target.path) } : value.target;
  return {
    ...value,
    python: resolvePython(value.python),
    target,
    pythonpath: value.pythonpath.map((entry) => path.resolve(entry)),
    outputCapBytes: value.outputCapBytes ?? DEFAULT_OUTPUT_CAP_BYTES,
    sandbox: value.sandbox ?? 'auto',
    warmUp: value.warmUp ?? true,
  };
}

function workerEnv(home: string, tmp: string): NodeJS.ProcessEnv {
  // A whitelist, so no credential in the caller's environment reaches the
  // verifier. Thread counts are pinned: threaded BLAS makes float sums vary
  // run to run and reserves address space per core, which trips RLIMIT_AS.
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    HOME: home,
    TMPDIR: tmp,
    USER: 'user',
    PYTHONHASHSEED: '0',
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONUNBUFFERED: '1',
    OMP_NUM_THREADS: '1',
    OPENBLAS_NUM_THREADS: '1',
    MKL_NUM_THREADS: '1',
  };
}

function targetLabel(target: VerifierTarget): string {
  return `${target.kind === 'module' ? target.module : target.path}:${target.fn}`;
}

function loadFailure(error: LoadError, options: NormalisedOptions): GatekeptError {
  const label = targetLabel(options.target);
  // Only the verifier's own frames: the harness and importlib frames are nothing the user can fix.
  const details = [error.message, ...verifierTraceback(error.traceback, error.message).slice(-TRACEBACK_TAIL_LINES)];
  switch (error.kind) {
    case 'python_too_old':
      return new GatekeptError('PYTHON_TOO_OLD', `'${options.python}': ${error.message}`, {
        suggestion: 'pass a Python 3.10 or newer with --python',
      });
    case 'module_not_found':
      return new GatekeptError('VERIFIER_NOT_FOUND', `cannot find the verifier module for ${label}`, {
        details: [error.message],
        suggestion:
          'check the module name; its package must be importable from the current directory or a --pythonpath directory',
      });
    case 'file_not_found':
      return new GatekeptError('VERIFIER_NOT_FOUND', `cannot find the verifier file for ${label}`, {
        details: [error.message],
      });
    case 'attribute_error':
      return new GatekeptError('VERIFIER_NOT_FOUND', `cannot find the verifier function ${label}`, {
        details: [error.message],
        suggestion: 'check the function name after the colon',
      });
    case 'syntax_error':
      return new GatekeptError('VERIFIER_IMPORT_FAILED', `the verifier ${label} has a syntax error`, { details });
    case 'import_error':
      return new GatekeptError('VERIFIER_IMPORT_FAILED', `importing the verifier ${label} failed`, {
        details,
        suggestion:
          error.type === 'ModuleNotFoundError'
            ? `install the missing package for the Python interpreter '${options.python}' (or pass another with --python)`
            : error.type === 'MemoryError' && options.memoryMb > 0
              ? `the worker is limited to limits.memory_mb = ${options.memoryMb} MiB; raise it in the policy (0 removes the limit)`
              : 'fix the error above; the verifier must import cleanly on its own',
      });
    case 'not_callable':
      return new GatekeptError('VERIFIER_NOT_CALLABLE', `the verifier ${label} cannot be called as a reward function`, {
        details: [error.message],
      });
    case 'import_timeout':
      return importTimeout(options, details);
  }
}

function importTimeout(options: NormalisedOptions, details: string[] = []): GatekeptError {
  return new GatekeptError(
    'VERIFIER_IMPORT_TIMEOUT',
    `could not audit: importing the verifier ${targetLabel(options.target)} used more than ${options.importTimeoutMs} ms of CPU time (timeouts.import_ms), or did not finish within ${options.importTimeoutMs * IMPORT_WALL_FACTOR} ms of wall time`,
    { details, suggestion: 'raise timeouts.import_ms in the policy if the verifier really needs longer to load; nothing was decided about its reward' },
  );
}

/** A version an interpreter (or a wrapper script) announced before dying, if it is too old. */
function oldVersionBanner(output: string): string | null {
  for (const match of output.matchAll(/\bPython (\d+)\.(\d+)(?:\.\d+)?/g)) {
    const major = Number(match[1]);
    const minor = Number(match[2]);
    if (major < 3 || (major === 3 && minor < 10)) return match[0];
  }
  return null;
}

function earlyExit(info: ExitInfo, worker: Worker, options: NormalisedOptions): GatekeptError {
  const stderr = escapeControl(worker.stderr.text());
  const details = tailLines(stderr, STDERR_TAIL_LINES);
  if (/needs Python 3\.10 or newer/.test(stderr) || /-X is reserved|unknown option.*-X/i.test(stderr)) {
    return new GatekeptError('PYTHON_TOO_OLD', `'${options.python}' is older than Python 3.10`, {
      details,
      suggestion: 'pass a Python 3.10 or newer with --python',
    });
  }
  const banner = oldVersionBanner(`${stderr}\n${worker.stdout.text()}`);
  if (banner !== null) {
    return new GatekeptError('PYTHON_TOO_OLD', `'${options.python}' is ${banner}, which is older than Python 3.10`, {
      details,
      suggestion: 'pass a Python 3.10 or newer with --python',
    });
  }
  if (info.code === 126 || info.code === 127) {
    return new GatekeptError('PYTHON_NOT_FOUND', `cannot run Python interpreter '${options.python}'`, {
      details,
      suggestion: 'install Python 3.10 or newer, or pass its path with --python',
    });
  }
  return new GatekeptError('HARNESS_FAILED', `the Python worker ${describeExit(info)} before it was ready`, {
    details,
    suggestion: `check that '${options.python}' runs as a Python 3.10 or newer interpreter`,
  });
}

type SegmentOutcome =
  | { kind: 'done' }
  /** The worker itself reported a timeout at `index` and was asked to stop there. */
  | { kind: 'stopped'; index: number }
  | { kind: 'timeout'; index: number; ms: number }
  | { kind: 'crashed'; index: number; ms: number; exit: ExitInfo };

/** A call that produced no reward; the error says why (none for a call never made). */
function noRewardResult(status: 'timeout' | 'crashed' | 'skipped', error: EvalResult['error'], ms: number): EvalResult {
  return { status, reward: null, rewardType: '', nonFinite: null, error, sideEffects: [], ms };
}

function timeoutResult(callTimeoutMs: number, ms: number): EvalResult {
  // Mirrors the worker's own timeout reply so the path taken does not show.
  return noRewardResult('timeout', { type: 'Timeout', message: `the verifier did not return within ${callTimeoutMs} ms` }, ms);
}

/** A request never sent: the audit stopped before it. */
export function skippedResult(): EvalResult {
  return noRewardResult('skipped', null, 0);
}

function crashedResult(exit: ExitInfo, ms: number): EvalResult {
  return noRewardResult('crashed', { type: 'ProcessExited', message: `the verifier process ${describeExit(exit)}` }, ms);
}

function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** A completion at least this long is remembered by both ends of a worker's pipe. */
const LONG_TEXT = 1024;
/** How many long completions each end remembers (the most recent ones): a few rows' worth. */
const LONG_TEXTS_KEPT = 256;
/** Characters compared first, to find a remembered completion that shares a start, an end or a middle. */
const LONG_PROBE = 64;
/** Offsets count UTF-16 units here and code points in Python: equal only without surrogates. */
const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * How a completion travels: as is; ['k', text], to be remembered as the next
 * long text; [number, kept start, middle, kept end], the remembered long text
 * of that number with its middle replaced; or [number, head, from, to, tail],
 * head + that text's characters from..to + tail (both remembered in turn).
 */
export type EncodedText =
  | string
  | ['k', string]
  | [number, number, string, number]
  | [number, string, number, number, string];

/** How far around a long text's middle its anchor is looked for: more than a padding's period. */
const ANCHOR_WINDOW = 512;
/** Characters hashed at each position considered for the anchor. */
const ANCHOR_GRAM = 16;
const HASH_FACTOR = 0x9e3779b1;
/** HASH_FACTOR ** (ANCHOR_GRAM - 1), in 32-bit arithmetic: takes a character out of the rolling hash. */
const HASH_DROP = Array.from({ length: ANCHOR_GRAM - 1 }).reduce<number>((power) => Math.imul(power, HASH_FACTOR), 1);

/**
 * Where a long text's middle probe starts: the position near its middle
 * whose following ANCHOR_GRAM characters hash highest (the first such). It
 * depends on the characters alone, so in two texts whose paddings are
 * shifted by a few characters (a longer gold before them) it falls on the
 * same place in the padding, which a fixed offset would not. The hash rolls:
 * one multiplication per position.
 */
function anchorAt(text: string): number {
  const from = Math.max(0, (text.length - ANCHOR_WINDOW) >>> 1);
  const to = Math.min(text.length - LONG_PROBE, from + ANCHOR_WINDOW);
  let hash = 0;
  for (let index = from; index < from + ANCHOR_GRAM; index += 1) hash = (Math.imul(hash, HASH_FACTOR) + text.charCodeAt(index)) | 0;
  let best = from;
  let top = hash >>> 0;
  for (let index = from + 1; index < to; index += 1) {
    const gone = Math.imul(text.charCodeAt(index - 1), HASH_DROP);
    hash = (Math.imul(hash - gone, HASH_FACTOR) + text.charCodeAt(index + ANCHOR_GRAM - 1)) | 0;
    if (hash >>> 0 > top) {
      top = hash >>> 0;
      best = index;
    }
  }
  return best;
}

/** Texts within a few hundred characters of each other share a class or are in adjacent ones. */
function sizeClass(length: number): number {
  return length >>> 9;
}

/**
 * Long attack completions differ little from row to row (50,000 characters
 * of padding and then the row's gold), and encoding, piping and decoding them
 * is most of what a fast verifier's audit costs. Both ends of a worker's pipe
 * number the long completions in the order they were sent and remember the
 * last LONG_TEXTS_KEPT, so a long completion that shares its start and end,
 * or its middle, with one of them goes as the difference, and the worker
 * rebuilds it (python/harness.py, _completion_text). The middle matters when
 * a row's gold sits at both ends of a padding: neither end matches the row
 * before, the padding between them does. One instance per worker process: a
 * new worker starts with nothing remembered.
 */
export class LongTextCodec {
  private readonly kept = new Map<number, string>();
  private next = 0;
  /** The latest remembered text with this start, this end, and this middle. */
  private readonly byHead = new Map<string, number>();
  private readonly byTail = new Map<string, number>();
  private readonly byMiddle = new Map<string, number>();
  /** Where each remembered text's middle probe starts. */
  private readonly anchors = new Map<number, number>();

  encode(text: string): EncodedText {
    if (text.length < LONG_TEXT || SURROGATE.test(text)) return text;
    const head = text.slice(0, LONG_PROBE);
    const tail = text.slice(-LONG_PROBE);
    const at = anchorAt(text);
    const middle = text.slice(at, at + LONG_PROBE);
    let best: EncodedText | null = null;
    let saved = LONG_TEXT / 2;
    // A padding repeats, so texts of other lengths share the middle: the
    // remembered ones of about this length are the ones worth comparing.
    const size = sizeClass(text.length);
    const candidates = new Set([this.byHead.get(head), this.byTail.get(tail)]);
    for (const near of [size - 1, size, size + 1]) candidates.add(this.byMiddle.get(`${near}:${middle}`));
    for (const number of candidates) {
      const base = number === undefined ? undefined : this.kept.get(number);
      if (base === undefined) continue;
      const limit = Math.min(base.length, text.length);
      const prefix = commonLength(base, text, limit, false);
      const suffix = commonLength(base, text, limit - prefix, true);
      if (prefix + suffix > saved) {
        saved = prefix + suffix;
        best = [number!, prefix, text.slice(prefix, text.length - suffix), suffix];
      }
      // The run of characters the two share around their anchors.
      const baseAt = this.anchors.get(number!)!;
      if (base.slice(baseAt, baseAt + LONG_PROBE) !== middle) continue;
      const before = commonLength(base.slice(0, baseAt), text.slice(0, at), Math.min(baseAt, at), true);
      const after = commonLength(base.slice(baseAt), text.slice(at), Math.min(base.length - baseAt, text.length - at), false);
      if (before + after > saved) {
        saved = before + after;
        best = [number!, text.slice(0, at - before), baseAt - before, baseAt + after, text.slice(at + after)];
      }
    }
    this.remember(text, head, tail, at);
    return best ?? ['k', text];
  }

  /** The worker's side, mirrored for tests: the completion rebuilt from what was sent. */
  decode(encoded: EncodedText): string {
    if (typeof encoded === 'string') return encoded;
    let text: string;
    if (encoded[0] === 'k') {
      text = encoded[1];
    } else if (encoded.length === 4) {
      const [number, prefix, middle, suffix] = encoded;
      const base = this.kept.get(number)!;
      text = base.slice(0, prefix) + middle + base.slice(base.length - suffix);
    } else {
      const [number, head, from, to, tail] = encoded;
      text = head + this.kept.get(number)!.slice(from, to) + tail;
    }
    this.remember(text, text.slice(0, LONG_PROBE), text.slice(-LONG_PROBE), anchorAt(text));
    return text;
  }

  private remember(text: string, head: string, tail: string, at: number): void {
    const number = this.next;
    this.next += 1;
    this.kept.set(number, text);
    this.anchors.set(number, at);
    this.byHead.set(head, number);
    this.byTail.set(tail, number);
    this.byMiddle.set(`${sizeClass(text.length)}:${text.slice(at, at + LONG_PROBE)}`, number);
    const gone = number - LONG_TEXTS_KEPT;
    const old = this.kept.get(gone);
    if (old === undefined) return;
    const oldAt = this.anchors.get(gone)!;
    this.kept.delete(gone);
    this.anchors.delete(gone);
    const oldHead = old.slice(0, LONG_PROBE);
    const oldTail = old.slice(-LONG_PROBE);
    const oldMiddle = `${sizeClass(old.length)}:${old.slice(oldAt, oldAt + LONG_PROBE)}`;
    if (this.byHead.get(oldHead) === gone) this.byHead.delete(oldHead);
    if (this.byTail.get(oldTail) === gone) this.byTail.delete(oldTail);
    if (this.byMiddle.get(oldMiddle) === gone) this.byMiddle.delete(oldMiddle);
  }
}

/**
 * How many characters `a` and `b` share at their start (or their end), up to
 * `limit`. Found by halving, each step one native comparison of two slices:
 * a character loop over 50,000 characters of padding costs more than the
 * verifier call it feeds.
 */
export function commonLength(a: string, b: string, limit: number, fromEnd: boolean): number {
  let same = 0;
  let high = limit;
  while (same < high) {
    const mid = (same + high + 1) >>> 1;
    const equal = fromEnd
      ? a.slice(a.length - mid, a.length - same) === b.slice(b.length - mid, b.length - same)
      : a.slice(same, mid) === b.slice(same, mid);
    if (equal) same = mid;
    else high = mid - 1;
  }
  return same;
}

/**
 * An eval request is the list [id, completion, answer, prompt, info]. The
 * requests of a batch mostly share one row's answer, prompt and info, so the
 * JSON of those three is kept from the request before when they are the same.
 */
class RequestWriter {
  private answer: string | null = null;
  private prompt: string | null | undefined = undefined;
  private info: Record<string, unknown> | undefined = undefined;
  private rest = '';

  constructor(private readonly codec: LongTextCodec) {}

  /**
   * requests[start..] as lines in chunks of about WRITE_CHUNK_CHARS. Every
   * request is checked before any completion is encoded: the codec
   * remembers what it encodes, so a batch that cannot be sent must leave it
   * as it was.
   */
  chunks(requests: readonly EvalRequest[], start: number, firstId: number): string[] {
    const rests = new Array<string>(requests.length - start);
    for (let index = start; index < requests.length; index += 1) {
      const request = requests[index]!;
      if (typeof request.completion !== 'string' || typeof request.answer !== 'string') {
        throw new GatekeptError('INTERNAL', `request ${index} needs string completion and answer`);
      }
      rests[index - start] = this.restOf(request, index);
    }
    // Lines are joined, not appended one by one: a string grown by `+=` is a
    // rope that the pipe's write has to flatten, which cost more than making it.
    const chunks: string[] = [];
    let lines: string[] = [];
    let length = 0;
    for (let index = start; index < requests.length; index += 1) {
      const line = `[${firstId + (index - start)},${JSON.stringify(this.codec.encode(requests[index]!.completion))}${rests[index - start]}\n`;
      lines.push(line);
      length += line.length;
      if (length >= WRITE_CHUNK_CHARS) {
        chunks.push(lines.join(''));
        lines = [];
        length = 0;
      }
    }
    if (lines.length > 0) chunks.push(lines.join(''));
    return chunks;
  }

  private restOf(request: EvalRequest, index: number): string {
    if (request.answer !== this.answer || request.prompt !== this.prompt || request.info !== this.info) {
      try {
        this.rest = `,${JSON.stringify([request.answer, request.prompt ?? null, request.info ?? {}]).slice(1)}`;
      } catch (error) {
        this.answer = null;
        throw new GatekeptError('BAD_ARGUMENT', `request ${index} cannot be sent to the verifier: ${String(error)}`, {
          cause: error,
        });
      }
      this.answer = request.answer;
      this.prompt = request.prompt;
      this.info = request.info;
    }
    return this.rest;
  }
}

/**
 * A batch serialised and sent when it was handed over, behind the batches
 * before it on the same worker: the worker goes on to it the moment it
 * finishes one, instead of waiting for Node to read its replies and encode
 * the next (a round trip per batch, which a slow verifier's audit pays
 * hundreds of times).
 */
interface Prepared {
  worker: Worker;
  firstId: number;
}

class PythonSession implements VerifierSession {
  info!: VerifierInfo;
  private worker: Worker | null = null;
  private restarts = 0;
  private nextId = 1;
  private closed = false;
  private closing: Promise<void> | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  /** Batches handed over and not finished, and the worker they were all sent ahead to (see prepare). */
  private pendingBatches = 0;
  private preparedFor: Worker | null = null;
  private readonly launchSpec: WorkerLaunch;
  /** The worker's home and temp directory as it sees them. */
  private readonly inside: { home: string; tmp: string };

  constructor(
    private readonly options: NormalisedOptions,
    private readonly workdir: string,
    private readonly sandbox: Sandbox,
    readable: readonly string[],
    harness: string,
  ) {
    const home = path.join(workdir, 'home');
    const tmp = path.join(workdir, 'tmp');
    const isolated = sandbox.kind === 'bwrap';
    this.inside = isolated ? { home: SANDBOX_HOME, tmp: SANDBOX_TMP } : { home, tmp };
    const layout: SandboxLayout = { scratch: workdir, readable };
    this.launchSpec = {
      harness,
      cwd: isolated ? workdir : home,
      env: workerEnv(this.inside.home, this.inside.tmp),
      sandbox: isolated ? { sandbox, layout } : null,
    };
  }

  get isolation(): Sandbox['kind'] {
    return this.sandbox.kind;
  }

  async start(): Promise<void> {
    const { worker, info } = await this.launch(this.options.warmUp);
    this.worker = worker;
    this.info = info;
  }

  evaluate(requests: readonly EvalRequest[], options: EvaluateOptions = {}): Promise<EvalResult[]> {
    const prepared = this.prepare(requests);
    this.pendingBatches += 1;
    const run = this.queue.then(() => this.evaluateAll(requests, options.stopOnTimeout ?? false, prepared, options.cancelled));
    this.queue = run
      .catch(() => undefined)
      .finally(() => {
        this.pendingBatches -= 1;
      });
    return run;
  }

  /**
   * Serialise and send a batch now, while the batches before it run. Both
   * ends of a worker's pipe number long completions in the order they are
   * encoded and sent (see LongTextCodec), so a batch is sent ahead only
   * while every batch waiting or running was sent ahead to the same worker:
   * then batches are encoded in the order the worker reads them. Otherwise
   * (a batch before it is encoded when it runs, or the worker was replaced)
   * it is encoded and sent when it runs, as is every batch after it until
   * the queue is empty.
   */
  private prepare(requests: readonly EvalRequest[]): Prepared | null {
    const worker = this.worker;
    if (this.pendingBatches === 0) this.preparedFor = worker;
    if (!worker || worker.exited || this.closed || this.preparedFor !== worker || requests.length === 0) {
      this.preparedFor = null;
      return null;
    }
    const firstId = this.nextId;
    let chunks: string[];
    try {
      chunks = new RequestWriter(worker.longTexts).chunks(requests, 0, firstId);
    } catch {
      // Reported when the batch runs; nothing was encoded.
      this.preparedFor = null;
      return null;
    }
    this.nextId += requests.length;
    // Node's stream holds what the pipe cannot take yet: two batches at most (see WorkerPool).
    for (const chunk of chunks) worker.write(chunk);
    return { worker, firstId };
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    const worker = this.worker;
    this.worker = null;
    if (worker) await worker.stop();
    // Synchronously: a dozen entries, removed faster than a round of
    // thread-pool calls for each would take, on the way out of every audit.
    rmSync(this.workdir, { recursive: true, force: true, maxRetries: 2 });
    liveDirRegistry().delete(this.workdir);
  }

  private assertOpen(): void {
    if (this.closed) throw new GatekeptError('INTERNAL', 'the verifier session is closed');
  }

  private async evaluateAll(
    requests: readonly EvalRequest[],
    stopOnTimeout: boolean,
    prepared: Prepared | null,
    cancelled: (() => boolean) | undefined,
  ): Promise<EvalResult[]> {
    this.assertOpen();
    const results = new Array<EvalResult>(requests.length);
    let start = 0;
    while (start < requests.length) {
      if (cancelled?.()) {
        for (let index = start; index < requests.length; index += 1) results[index] = skippedResult();
        // Requests sent ahead are in the worker's pipe and would be answered
        // to nobody: a fresh worker serves the next batch.
        if (start === 0 && prepared && prepared.worker === this.worker) {
          prepared.worker.kill();
          await withTimeout(prepared.worker.done, KILL_WAIT_MS);
        }
        return results;
      }
      const worker = await this.ensureWorker();
      // Sent ahead to this very worker: its requests are in the pipe already.
      const sent = start === 0 && prepared?.worker === worker ? prepared : null;
      const outcome = await this.runSegment(worker, requests, start, results, stopOnTimeout, sent);
      if (outcome.kind === 'done') break;
      if (this.closed) {
        throw new GatekeptError('HARNESS_FAILED', 'the verifier session was closed during an evaluation');
      }
      if (outcome.kind !== 'stopped') {
        results[outcome.index] =
          outcome.kind === 'timeout'
            ? timeoutResult(this.options.callTimeoutMs, outcome.ms)
            : crashedResult(outcome.exit, outcome.ms);
      }
      start = outcome.index + 1;
      if (stopOnTimeout) {
        for (let index = start; index < requests.length; index += 1) results[index] = skippedResult();
        // The worker still holds the rest of the batch in its pipe and would
        // run it; a fresh one is started when the next batch arrives.
        worker.kill();
        await withTimeout(worker.done, KILL_WAIT_MS);
        break;
      }
      await this.restart();
    }
    return results;
  }

  private async ensureWorker(): Promise<Worker> {
    if (this.worker && !this.worker.exited) return this.worker;
    await this.restart();
    return this.worker!;
  }

  private async restart(): Promise<void> {
    this.assertOpen();
    const old = this.worker;
    this.worker = null;
    // Batches sent ahead to the old worker are encoded and sent again when they run.
    this.preparedFor = null;
    if (old) {
      old.kill();
      await withTimeout(old.done, KILL_WAIT_MS);
    }
    this.restarts += 1;
    if (this.restarts > MAX_RESTARTS) {
      throw new GatekeptError(
        'HARNESS_FAILED',
        `the verifier crashed or hung more than ${MAX_RESTARTS} times in one session; giving up`,
        { suggestion: 'run the verifier on a few of the failing completions by hand to see why it dies' },
      );
    }
    await this.emptyWorkdir();
    try {
      // A worker restarted after a crash or a stuck call is not warmed up:
      // the warm-up may be what hangs, and a call that meets a cold worker's
      // own time limit is run again alone before it counts (see the evaluator).
      const { worker } = await this.launch(false);
      this.worker = worker;
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new GatekeptError('HARNESS_FAILED', `restarting the verifier worker failed: ${reason}`, {
        cause: error,
        details: error instanceof GatekeptError ? error.details : [],
      });
    }
  }

  /**
   * A fresh worker starts from an empty workdir, so runs stay comparable. In
   * the sandbox each worker has new file systems of its own, and nothing here
   * is ever the verifier's to touch; without it, the verifier holds the
   * user's own rights anyway.
   */
  private async emptyWorkdir(): Promise<void> {
    if (this.sandbox.kind === 'bwrap') return;
    for (const dir of ['home', 'tmp']) {
      const root = path.join(this.workdir, dir);
      const entries = await readdir(root).catch(() => [] as string[]);
      await Promise.all(entries.map((entry) => rm(path.join(root, entry), { recursive: true, force: true })));
      await mkdir(root, { recursive: true, mode: 0o700 });
    }
  }

  private async launch(warmUp = true): Promise<{ worker: Worker; info: VerifierInfo }> {
    const options = this.options;
    const worker = await Worker.start(options, this.launchSpec);
    try {
      const init = {
        op: 'init',
        target: options.target,
        pythonpath: options.pythonpath,
        completion_format: options.completionFormat,
        call_timeout_ms: options.callTimeoutMs,
        import_timeout_ms: options.importTimeoutMs,
        import_wall_ms: options.importTimeoutMs * IMPORT_WALL_FACTOR,
        memory_mb: options.memoryMb,
        workdir: this.inside.home,
        // In the sandbox /dev/shm is a private scratch file system (joblib and
        // multiprocessing write there): writing it is no side effect on the host.
        writable: [this.inside.home, this.inside.tmp, ...(this.sandbox.kind === 'bwrap' ? ['/dev/shm'] : [])],
        isolated: this.sandbox.kind === 'bwrap',
        warm_up: warmUp,
      };
      worker.write(`${JSON.stringify(init)}\n`);
      const info = await this.awaitReady(worker);
      return { worker, info };
    } catch (error) {
      worker.setHandlers(null);
      await worker.stop();
      throw error;
    }
  }

  private awaitReady(worker: Worker): Promise<VerifierInfo> {
    const options = this.options;
    return new Promise<VerifierInfo>((resolve, reject) => {
      let settled = false;
      const settle = (action: () => void): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        worker.setHandlers(null);
        action();
      };
      const timer = setTimeout(() => {
        worker.kill();
        settle(() => reject(importTimeout(options)));
      }, readyDeadlineMs(options.importTimeoutMs, options.callTimeoutMs));
      worker.setHandlers({
        lines: (lines) => {
          const line = lines[0]!;
          try {
            if (lines.length > 1) throw protocolError('more than one reply to init', lines[1]!);
            let parsed: unknown;
            try {
              parsed = JSON.parse(line);
            } catch {
              parsed = undefined;
            }
            const reply = checkedReadyReply(parsed) ?? parseReply(readyReplySchema, line);
            if (reply.op === 'error') throw protocolError(reply.message, line);
            if (!reply.ok) {
              throw loadFailure(
                { ...reply.error, message: escapeControl(reply.error.message), traceback: escapeControl(reply.error.traceback) },
                options,
              );
            }
            settle(() =>
              resolve({
                params: reply.params,
                varKwargs: reply.var_kwargs,
                isAsync: reply.is_async,
                pythonVersion: reply.python,
                sourceFile: reply.source_file === null ? null : escapeLine(reply.source_file),
                sha256: reply.sha256,
                importMs: reply.import_ms,
              }),
            );
          } catch (error) {
            settle(() => reject(error));
          }
        },
        exit: (info) => settle(() => reject(earlyExit(info, worker, options))),
      });
    });
  }

  /**
   * Streams requests[start..] to the worker and collects replies in order until
   * the batch is done or the request in flight hangs or kills the worker.
   */
  private runSegment(
    worker: Worker,
    requests: readonly EvalRequest[],
    start: number,
    results: EvalResult[],
    stopOnTimeout: boolean,
    sent: Prepared | null,
  ): Promise<SegmentOutcome> {
    const total = requests.length;
    const firstId = sent ? sent.firstId : this.nextId;
    if (!sent) this.nextId += total - start;
    const deadlineMs = this.options.callTimeoutMs + CALL_GRACE_MS;

    return new Promise<SegmentOutcome>((resolve, reject) => {
      let next = start;
      let settled = false;
      let inFlightSince = performance.now();
      let strays = false;
      let files: EvalResult['sideEffects'] = [];

      const settle = (action: () => void): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        worker.setHandlers(null);
        action();
      };
      const fail = (error: unknown): void => {
        worker.kill();
        settle(() => reject(error));
      };
      const timer = setTimeout(() => {
        worker.kill();
        const ms = roundMs(performance.now() - inFlightSince);
        settle(() => resolve({ kind: 'timeout', index: next, ms }));
      }, deadlineMs);

      worker.setHandlers({
        lines: (lines) => {
          if (settled) return;
          for (let at = 0; at < lines.length; at += 1) {
            const line = lines[at]!;
            if (next >= total) {
              // Replies to a batch sent ahead behind this one: its own, for later.
              worker.giveBack(lines.slice(at));
              break;
            }
            let reply: WorkerReply;
            try {
              reply = readReply(line);
            } catch (error) {
              return fail(error);
            }
            if (reply.op === 'files') {
              // Said, like strays, just before the batch's last replies.
              files = reply.effects;
              continue;
            }
            if (reply.op === 'strays') {
              // The supervisor looks once the worker is idle and says so just
              // before the batch's last replies: pinned on the next result.
              strays = true;
              continue;
            }
            if (reply.op === 'tampered') return fail(tampered(reply.message, line));
            if (reply.op === 'error') return fail(protocolError(reply.message, line));
            if (next >= total) return fail(protocolError('more replies than requests', line));
            const expectedId = firstId + (next - start);
            if (reply.id !== expectedId) {
              return fail(protocolError(`reply id ${reply.id} where ${expectedId} was expected`, line));
            }
            results[next] =
              strays || files.length > 0
                ? { ...reply.result, sideEffects: [...reply.result.sideEffects, ...(strays ? [STRAY_EFFECT] : []), ...files] }
                : reply.result;
            strays = false;
            files = [];
            next += 1;
            if (stopOnTimeout && reply.result.status === 'timeout' && next < total) {
              const index = next - 1;
              settle(() => resolve({ kind: 'stopped', index }));
              return;
            }
          }
          if (next >= total) {
            settle(() => resolve({ kind: 'done' }));
            return;
          }
          inFlightSince = performance.now();
          timer.refresh();
        },
        exit: (exit) => {
          const ms = roundMs(performance.now() - inFlightSince);
          settle(() => resolve({ kind: 'crashed', index: next, ms, exit }));
        },
      });

      if (sent) return;
      let chunks: string[];
      try {
        chunks = new RequestWriter(worker.longTexts).chunks(requests, start, firstId);
      } catch (error) {
        fail(error);
        return;
      }
      this.writeRequests(worker, chunks, () => settled).catch(fail);
    });
  }

  private async writeRequests(worker: Worker, chunks: readonly string[], stopped: () => boolean): Promise<void> {
    for (const chunk of chunks) {
      if (stopped()) return;
      if (!worker.write(chunk)) await worker.drain();
    }
  }
}


export async function openVerifierSession(options: SessionOptions): Promise<VerifierSession> {
  const normalised = normaliseOptions(options);
  // The first worker of a process starts in the sandbox hoped for without
  // waiting for the probe; coming up, it answers the probe's question, so
  // the probe runs only if it fails, and then it is replaced if the probe
  // finds a different sandbox.
  const hoped = hopedSandbox(normalised.sandbox);
  const hopeful = hoped ? startSession(normalised, hoped) : null;
  if (hopeful) hopedLaunch(hopeful);
  const probing = openSandbox(normalised.sandbox);
  probing.catch(() => undefined);
  if (hoped && hopeful) {
    hopeful.catch(() => undefined);
    let sandbox: Sandbox;
    try {
      sandbox = await probing;
    } catch (error) {
      await hopeful.then((session) => session.close(), () => undefined);
      throw error;
    }
    if (sameSandbox(sandbox, hoped)) return hopeful;
    await hopeful.then((session) => session.close(), () => undefined);
    return startSession(normalised, sandbox);
  }
  return startSession(normalised, await probing);
}

async function startSession(normalised: NormalisedOptions, sandbox: Sandbox): Promise<VerifierSession> {
  const runtime = await probePython(normalised.python);
  const workdir = await makeWorkDir(liveDirRegistry());
  const readable = [
    ...runtime.paths,
    ...normalised.pythonpath,
    ...(normalised.target.kind === 'file' ? [path.dirname(normalised.target.path)] : []),
  ];
  // In the sandbox, the interpreter's own executable rather than a wrapper
  // around it (a pyenv shim needs machinery the sandbox hides); without it,
  // the interpreter exactly as given.
  const python = sandbox.kind === 'bwrap' ? runtime.executable : normalised.python;
  const harness = runtime.bytecode ? path.join(runtime.bytecode, 'harness.pyc') : HARNESS_PATH;
  const session = new PythonSession({ ...normalised, python }, workdir, sandbox, readable, harness);
  try {
    await session.start();
  } catch (error) {
    await session.close();
    throw error;
  }
  return session;
}
