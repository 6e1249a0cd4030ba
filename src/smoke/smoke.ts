import { createHash } from 'node:crypto';
import { readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import * as z from 'zod';
import { renderInFormat } from '../audit/answer-values.js';
import { AUDIT_FILE_NAME } from '../pack/pack.js';
import { DATA_FILE_NAME, VERIFIER_FILE_NAME, moduleName } from '../pack/environment-spec.js';
import { EXIT, GatekeptError, type ExitCode } from '../errors.js';
import { type Row, readJsonl } from '../rows.js';
import { auditRecordSchema, type AuditRecord } from '../audit/record.js';
import { packAuditRecordSchema, type PackAuditRecord } from '../pack/pack-record.js';
import { PACKAGE_ROOT } from '../paths.js';
import { cleanUpNow, killAllGroups, killGroup, liveDirRegistry } from '../runtime/cleanup.js';
import { LineFramer, PythonProcess } from '../runtime/python-process.js';
import { probePython, resolvePython } from '../runtime/resolve-python.js';
import { openSandbox, SANDBOX_HOME, SANDBOX_TMP, type Sandbox, type SandboxMode } from '../runtime/sandbox.js';
import { makeWorkDir } from '../runtime/stale-dirs.js';
import { ANSWER_FORMATS, type AnswerFormat, type Severity } from '../types.js';

/**
 * `gatekept smoke`: run an emitted package the way its users will (the
 * OpenEnv server over loopback, or the verifiers environment's rubric) and
 * replay the completions the gate scored, expecting the same rewards. The
 * gate audited a function; this checks the package around it still calls
 * that function the same way.
 */

export type SmokeTarget = 'openenv' | 'verifiers';

export interface SmokeOptions {
  target: SmokeTarget;
  /** The package directory: `<out>/openenv/<env_id>` or `<out>/verifiers/<env_id>`. */
  dir: string;
  /** The audit to replay (default: the gatekept_audit.json two levels above the package). */
  audit?: string;
  python?: string;
  /** Wall-clock limit for the whole run, start-up included. */
  timeoutS?: number;
  /** Address-space limit of the package's processes. */
  memoryMb?: number;
  cwd?: string;
  /** Isolation of the package's processes (default 'auto'). */
  sandbox?: SandboxMode;
}

export interface SmokeCheck {
  name: string;
  ok: boolean;
  detail: string;
}

export interface SmokeEpisode {
  kind: 'honest' | 'attack';
  row: number;
  attack_id: string | null;
  severity: Severity | null;
  expected: number;
  observed: number | null;
  ok: boolean;
  /** Why the episode failed besides a different reward. */
  problems: string[];
}

/** `gatekept-smoke-<pid>-XXXXXX`: the pid says whether the run that made it is still alive. */

/** Serialisable as is: `--json` prints it. */
export interface SmokeReport {
  target: SmokeTarget;
  env_id: string;
  package_dir: string;
  audit_file: string;
  python: string;
  passed: boolean;
  exit_code: ExitCode;
  checks: SmokeCheck[];
  episodes: SmokeEpisode[];
  /** Every process the run started (each led its own process group); all are gone when it returns. */
  pids: number[];
  /** The package's stderr tail, when something failed. */
  log: string[];
  duration_ms: number;
}

export const SMOKE_SCRIPT = path.join(PACKAGE_ROOT, 'python', 'smoke.py');
export const REWARD_TOLERANCE = 1e-9;
const DEFAULT_TIMEOUT_S = 120;
const DEFAULT_MEMORY_MB = 4096;
const EVENT_PREFIX = 'GATEKEPT_SMOKE ';
const LOG_TAIL_LINES = 25;
const STDERR_CAP = 64 * 1024;
const STOP_GRACE_MS = 3000;
const HEALTH_POLL_MS = 250;
const EXIT_DRAIN_MS = 500;
const ATTACK_FALLBACK = 9;
const HONEST_FALLBACK = 3;
/** Keys that would hand the agent its answer. */
const GOLD_KEYS = new Set(['answer', 'gold', 'solution', 'ground_truth', 'target', 'expected']);

// ---------------------------------------------------------------------------
// Inputs: the package and the audit

interface PackageInfo {
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

type DataRow = Pick<Row, 'question' | 'answer'>;

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

async function resolvePackage(target: SmokeTarget, dir: string): Promise<PackageInfo> {
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

async function readRows(pkg: PackageInfo): Promise<DataRow[]> {
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
 * What smoke reads of an audit: the record `pack` wrote beside the packages, or
 * a gate record (`gatekept gate --json`), each checked against its own schema.
 */
const auditSchema = z.union([packAuditRecordSchema, auditRecordSchema]);

interface Audit {
  target: AuditRecord['target'];
  findings: AuditRecord['findings'];
  honest: AuditRecord['honest'];
  package: PackAuditRecord['package'] | null;
  smoke_probes: PackAuditRecord['smoke_probes'] | null;
}


interface Probe {
  kind: 'honest' | 'attack';
  row: number;
  completion: string;
  expected: number;
  attackId: string | null;
  severity: Severity | null;
}

async function loadAudit(file: string): Promise<Audit> {
  const text = await readFile(file, 'utf8').catch(() => null);
  if (text === null) {
    throw new GatekeptError('FILE_NOT_FOUND', `no audit at ${file}`, {
      suggestion: `keep the package inside the tree \`gatekept pack\` wrote (${AUDIT_FILE_NAME} sits two levels above it), or pass --audit FILE`,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new GatekeptError('BAD_ARGUMENT', `the audit ${file} is not JSON`, { details: [String(error)] });
  }
  const parsed = auditSchema.safeParse(json);
  if (!parsed.success) {
    throw new GatekeptError('BAD_ARGUMENT', `the audit ${file} is not a gatekept audit record`, {
      details: parsed.error.issues.slice(0, 8).map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`),
      suggestion: `pass the ${AUDIT_FILE_NAME} that \`gatekept pack\` wrote with this package`,
    });
  }
  const record = parsed.data;
  return {
    target: record.target,
    findings: record.findings,
    honest: record.honest,
    package: 'package' in record ? record.package : null,
    smoke_probes: 'smoke_probes' in record ? record.smoke_probes : null,
  };
}

async function answerFormatOf(audit: Audit, pkg: PackageInfo): Promise<AnswerFormat | null> {
  if (audit.package?.answer_format) return audit.package.answer_format;
  const source = await readFile(pkg.environmentFile, 'utf8').catch(() => '');
  const stated = /^ANSWER_FORMAT = "(\w+)"$/m.exec(source)?.[1];
  return (ANSWER_FORMATS as readonly string[]).includes(stated ?? '') ? (stated as AnswerFormat) : null;
}

/** A finding's completion is an excerpt; only one that was never cut can be replayed. */
function wholeCompletion(finding: Audit['findings'][number]): boolean {
  if (finding.completion.length !== finding.completion_length) return false;
  return !(finding.completion.endsWith('…') && [...finding.completion].length === 241);
}

/**
 * The probes the pack recorded, or, for an audit written without them, the
 * audited golds in the package's format and the findings kept whole.
 */
async function probesOf(audit: Audit, pkg: PackageInfo, file: string): Promise<Probe[]> {
  if (audit.smoke_probes) {
    return audit.smoke_probes.map((probe) => ({
      kind: probe.kind,
      row: probe.row,
      completion: probe.completion,
      expected: probe.expected_reward,
      attackId: probe.attack_id ?? null,
      severity: probe.severity ?? null,
    }));
  }
  const probes: Probe[] = [];
  const format = await answerFormatOf(audit, pkg);
  if (format && audit.honest) {
    for (const gold of audit.target.golds) {
      const cell = audit.honest.calibration.find((entry) => entry.row === gold.row && entry.format === format && !entry.think);
      if (cell?.honest === null || cell?.honest === undefined) continue;
      probes.push({ kind: 'honest', row: gold.row, completion: renderInFormat(format, gold.answer), expected: cell.honest, attackId: null, severity: null });
      if (probes.length === HONEST_FALLBACK) break;
    }
  }
  const seen = new Set<string>();
  for (const finding of audit.findings) {
    if (finding.alternate_gold || finding.reward === null || !wholeCompletion(finding) || seen.has(finding.attack_id)) continue;
    seen.add(finding.attack_id);
    probes.push({ kind: 'attack', row: finding.row, completion: finding.completion, expected: finding.reward, attackId: finding.attack_id, severity: finding.severity });
    if (seen.size === ATTACK_FALLBACK) break;
  }
  if (probes.length === 0) {
    throw new GatekeptError('BAD_ARGUMENT', `the audit ${file} records nothing to replay`, {
      suggestion: 'pack the seed again with this version of gatekept: it records the probes smoke replays',
    });
  }
  return probes;
}

// ---------------------------------------------------------------------------
// Processes: each in its own group, all killed on the way out

interface SmokeEvent {
  event: string;
  [key: string]: unknown;
}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Where a helper runs: the sandbox (if any) and the host directories it may write. */
interface HelperPlace {
  sandbox: Sandbox;
  /** Host working directory: the helper's home; `tmp/` inside it is its temp directory. */
  workdir: string;
  /** Host paths the helper must read (the package). */
  readable: string[];
  /** The OpenEnv server and its player talk over the host's loopback. */
  shareNet: boolean;
}

/** One of smoke.py's modes in a runtime PythonProcess, reading the events it prints on stdout. */
class Helper {
  private readonly events: SmokeEvent[] = [];
  private waiters: (() => void)[] = [];
  private exitedAt = 0;
  private drained = false;

  private constructor(private readonly proc: PythonProcess) {
    const framer = new LineFramer((lines) => {
      for (const line of lines) {
        if (!line.startsWith(EVENT_PREFIX)) continue;
        try {
          const event = JSON.parse(line.slice(EVENT_PREFIX.length)) as SmokeEvent;
          if (event && typeof event.event === 'string') this.events.push(event);
        } catch {
          // not ours after all
        }
      }
      this.wake();
    });
    proc.stdoutStream?.setEncoding('utf8');
    proc.stdoutStream?.on('data', (chunk: string) => framer.push(chunk));
    void proc.exited.then(() => {
      this.exitedAt = Date.now();
      this.wake();
    });
    // 'close' comes after the pipes drain, so every event line is in by then.
    void proc.closed.then(() => {
      this.drained = true;
      this.wake();
    });
  }

  static async start(python: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv, place: HelperPlace, input?: string): Promise<Helper> {
    const isolated = place.sandbox.kind === 'bwrap';
    const proc = await PythonProcess.start({
      python,
      args: [SMOKE_SCRIPT, ...args],
      cwd: isolated ? place.workdir : cwd,
      env,
      ...(input === undefined ? {} : { input }),
      outputCapBytes: STDERR_CAP,
      minimumVersion: '3.11',
      ...(isolated
        ? {
            sandbox: {
              sandbox: place.sandbox,
              layout: { scratch: place.workdir, readable: place.readable, shareNet: place.shareNet },
            },
          }
        : {}),
    });
    return new Helper(proc);
  }

  get pid(): number {
    return this.proc.pid;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }

  get done(): boolean {
    return this.proc.done;
  }

  /** The first event with one of these names, or null once the process has exited without one. */
  async next(names: readonly string[]): Promise<SmokeEvent | null> {
    for (;;) {
      const found = this.events.find((event) => names.includes(event.event));
      if (found) return found;
      // A child the package left behind can hold the pipe open after the exit.
      if (this.proc.done && (this.drained || Date.now() - this.exitedAt > EXIT_DRAIN_MS)) return null;
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        // The exit may arrive before the pipes close; look again shortly.
        if (this.proc.done) setTimeout(resolve, 50);
      });
    }
  }

  exitDescription(): string {
    return this.proc.exitDescription();
  }

  stderrTail(lines = LOG_TAIL_LINES): string[] {
    return this.proc.stderrTail(lines);
  }

  /** SIGTERM the group, then SIGKILL whatever is left, and wait for the leader. */
  async stop(): Promise<void> {
    await this.proc.stop(STOP_GRACE_MS);
  }
}

/** Nothing from the caller's environment but PATH: no credentials, tokens or proxies reach the package. */
function scrubbedEnv(home: string, pythonpath: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    HOME: home,
    TMPDIR: home === SANDBOX_HOME ? SANDBOX_TMP : path.join(home, 'tmp'),
    PYTHONPATH: pythonpath,
    PYTHONHASHSEED: '0',
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONUNBUFFERED: '1',
    // The packages bundle their data; nothing may be fetched.
    HF_DATASETS_OFFLINE: '1',
    HF_HUB_OFFLINE: '1',
    HF_DATASETS_DISABLE_PROGRESS_BARS: '1',
    OMP_NUM_THREADS: '1',
    OPENBLAS_NUM_THREADS: '1',
    MKL_NUM_THREADS: '1',
  };
}

class Deadline {
  readonly at: number;
  constructor(readonly seconds: number) {
    this.at = Date.now() + seconds * 1000;
  }

  get remainingMs(): number {
    return Math.max(0, this.at - Date.now());
  }

  /** Resolves to the value, or to `timedOut` when the deadline passes first. */
  race<T, U>(work: Promise<T>, timedOut: U): Promise<T | U> {
    let timer: NodeJS.Timeout | undefined;
    const expiry = new Promise<U>((resolve) => {
      timer = setTimeout(() => resolve(timedOut), this.remainingMs);
    });
    return Promise.race([work, expiry]).finally(() => clearTimeout(timer));
  }
}

const TIMED_OUT = Symbol('timed out');

interface Interruption {
  promise: Promise<never>;
  dispose(): void;
}

/**
 * SIGINT, SIGTERM and SIGHUP for the duration of a run: kill the package's processes,
 * then let the signal do what it would have done. Runs before any handler
 * registered earlier (the CLI's), which may end the process at once.
 */
function guardSignals(): Interruption {
  let reject: (error: Error) => void = () => undefined;
  const promise = new Promise<never>((_, fail) => {
    reject = fail;
  });
  promise.catch(() => undefined);
  const handlers = new Map<NodeJS.Signals, () => void>();
  const dispose = (): void => {
    for (const [signal, handler] of handlers) process.off(signal, handler);
    handlers.clear();
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const handler = (): void => {
      killAllGroups();
      dispose();
      reject(new GatekeptError('HARNESS_FAILED', `interrupted by ${signal}`));
      // With no other listener Node would have ended the process; so do we,
      // and a death by signal runs no exit hook.
      if (process.listenerCount(signal) === 0) {
        cleanUpNow();
        process.kill(process.pid, signal);
      }
    };
    handlers.set(signal, handler);
    process.prependListener(signal, handler);
  }
  return { promise, dispose };
}

// ---------------------------------------------------------------------------
// Running the package

interface Observed {
  reward: number | null;
  problems: string[];
}

function missingPackage(event: SmokeEvent, python: string, target: SmokeTarget): GatekeptError {
  const modules = (event.modules as string[] | undefined) ?? [];
  const distributions = (event.distributions as string[] | undefined) ?? modules;
  const named = modules.map((module, index) => {
    const distribution = distributions[index] ?? module;
    return distribution === module ? module : `${distribution} (import ${module})`;
  });
  // openenv brings uvicorn and websockets along, classic verifiers brings datasets.
  const install = distributions.includes('openenv') ? ['openenv'] : distributions.includes('verifiers') ? ['verifiers'] : distributions;
  const what = target === 'openenv' ? 'serve the OpenEnv package' : 'load the verifiers package';
  return new GatekeptError(
    'PYTHON_PACKAGE_MISSING',
    `'${python}' (Python ${String(event.version)}) cannot ${what}: it lacks the Python package${named.length === 1 ? '' : 's'} ${named.join(', ')}`,
    { suggestion: `pip install ${install.join(' ')} into that interpreter (\`${python} -m pip install ${install.join(' ')}\`), or pass --python with one that has it` },
  );
}

function tooOld(event: SmokeEvent, python: string): GatekeptError {
  return new GatekeptError('PYTHON_TOO_OLD', `'${python}' is Python ${String(event.version)}; the package needs ${String(event.minimum)} or newer`, {
    suggestion: 'pass a newer interpreter with --python',
  });
}

/** Turn a helper that ended without its answer into the error that explains it. */
function helperFailure(proc: Helper, event: SmokeEvent | null, python: string, target: SmokeTarget, what: string): GatekeptError {
  if (event?.event === 'missing') return missingPackage(event, python, target);
  if (event?.event === 'too_old') return tooOld(event, python);
  return new GatekeptError('ENV_START_FAILED', `${what}: the Python process ${proc.exitDescription()}`, { details: proc.stderrTail() });
}

async function fetchJson(url: string, deadline: Deadline): Promise<{ status: number; body: unknown } | { error: string }> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(Math.max(1, Math.min(5000, deadline.remainingMs))) });
    const text = await response.text();
    try {
      return { status: response.status, body: JSON.parse(text) as unknown };
    } catch {
      return { status: response.status, body: text };
    }
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

const brief = (value: unknown): string => {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 160 ? `${text.slice(0, 160)}…` : text;
};

interface RunContext {
  pkg: PackageInfo;
  probes: Probe[];
  rows: DataRow[];
  python: string;
  workdir: string;
  /** The helpers' home as they see it. */
  home: string;
  sandbox: Sandbox;
  /** Directories the interpreter reads, kept visible in the sandbox. */
  pythonPaths: string[];
  deadline: Deadline;
  memoryMb: number;
  checks: SmokeCheck[];
  pids: number[];
  log: string[];
  interruption: Promise<never>;
}

async function runOpenEnv(context: RunContext): Promise<Observed[]> {
  const { pkg, probes, rows, python, workdir, deadline, checks } = context;
  const env = scrubbedEnv(context.home, pkg.dir);
  const cpuS = Math.ceil(deadline.seconds * 2);
  const place: HelperPlace = { sandbox: context.sandbox, workdir, readable: [pkg.dir, ...context.pythonPaths], shareNet: true };
  const server = await Helper.start(python, ['serve', pkg.dir, pkg.app, '--memory-mb', String(context.memoryMb), '--cpu-s', String(cpuS)], pkg.dir, env, place);
  context.pids.push(server.pid);
  try {
    const listening = await Promise.race([deadline.race(server.next(['listening', 'missing', 'too_old']), TIMED_OUT), context.interruption]);
    if (listening === TIMED_OUT) {
      throw new GatekeptError('ENV_START_FAILED', `the server did not start within --timeout-s ${deadline.seconds}`, { details: server.stderrTail() });
    }
    if (listening?.event !== 'listening') throw helperFailure(server, listening, python, 'openenv', 'the server did not start');
    const base = `http://127.0.0.1:${String(listening.port)}`;

    // 1. Health: the app imported and uvicorn serves it.
    let health: unknown = null;
    for (;;) {
      if (server.done) {
        throw new GatekeptError('ENV_START_FAILED', `the server ${server.exitDescription()} before /health answered`, { details: server.stderrTail() });
      }
      if (deadline.remainingMs === 0) {
        throw new GatekeptError('ENV_START_FAILED', `GET /health did not answer {"status": "healthy"} within --timeout-s ${deadline.seconds}`, {
          details: [`last answer: ${brief(health)}`, ...server.stderrTail()],
        });
      }
      const answer = await Promise.race([fetchJson(`${base}/health`, deadline), context.interruption]);
      health = 'error' in answer ? answer.error : answer.body;
      if (!('error' in answer) && answer.status === 200 && (answer.body as { status?: unknown } | null)?.status === 'healthy') break;
      await Promise.race([delay(HEALTH_POLL_MS), context.interruption]);
    }
    checks.push({ name: 'health', ok: true, detail: 'GET /health answered {"status": "healthy"}' });

    // 2. Schema and metadata.
    const schema = await fetchJson(`${base}/schema`, deadline);
    const schemaBody = 'error' in schema ? null : (schema.body as { action?: { properties?: Record<string, unknown> }; observation?: { properties?: Record<string, unknown> } } | null);
    const actionFields = Object.keys(schemaBody?.action?.properties ?? {});
    const observationFields = Object.keys(schemaBody?.observation?.properties ?? {});
    const schemaOk = actionFields.includes('answer') && observationFields.length > 0 && !observationFields.some((field) => GOLD_KEYS.has(field));
    checks.push({
      name: 'schema',
      ok: schemaOk,
      detail: 'error' in schema
        ? `GET /schema failed: ${schema.error}`
        : `action fields: ${actionFields.join(', ') || 'none'}; observation fields: ${observationFields.join(', ') || 'none'}`,
    });
    const metadata = await fetchJson(`${base}/metadata`, deadline);
    const name = 'error' in metadata ? undefined : (metadata.body as { name?: unknown } | null)?.name;
    checks.push({
      name: 'metadata',
      ok: name === pkg.envId,
      detail: 'error' in metadata ? `GET /metadata failed: ${metadata.error}` : `name: ${brief(name)}${name === pkg.envId ? '' : ` (expected ${pkg.envId})`}`,
    });

    // 3. Episodes over one WebSocket session, as a trainer plays them.
    const input = JSON.stringify({ probes: probes.map((probe) => ({ row: probe.row, completion: probe.completion })) });
    const messageTimeoutS = Math.max(1, Math.min(30, Math.floor(deadline.remainingMs / 1000)));
    const player = await Helper.start(
      python,
      ['play', `ws://127.0.0.1:${String(listening.port)}/ws`, '--message-timeout-s', String(messageTimeoutS)],
      workdir,
      scrubbedEnv(context.home, ''),
      place,
      input,
    );
    context.pids.push(player.pid);
    let played: SmokeEvent | null | typeof TIMED_OUT;
    try {
      played = await Promise.race([deadline.race(player.next(['played', 'missing', 'too_old']), TIMED_OUT), context.interruption]);
    } finally {
      await player.stop();
    }
    if (played === TIMED_OUT) {
      throw new GatekeptError('HARNESS_FAILED', `the episodes did not finish within --timeout-s ${deadline.seconds}`, { details: server.stderrTail() });
    }
    if (played?.event !== 'played') {
      const failure = helperFailure(player, played, python, 'openenv', 'playing the episodes failed');
      throw failure.code === 'ENV_START_FAILED' ? new GatekeptError('HARNESS_FAILED', failure.message, { details: [...failure.details, ...server.stderrTail()] }) : failure;
    }
    const results = (played.results as EpisodeWire[] | undefined) ?? [];
    const observed = probes.map((probe, index) => judgeEpisode(probe, results[index], rows));
    if (observed.some((episode) => episode.problems.length > 0) || server.done) context.log.push(...server.stderrTail());
    if (server.done) checks.push({ name: 'server', ok: false, detail: `the server ${server.exitDescription()} during the episodes` });
    return observed;
  } finally {
    await server.stop();
  }
}

interface EpisodeWire {
  reset: { type: string; keys: string[]; question: unknown; row_index: unknown; done: unknown; reward: unknown; message: unknown } | null;
  step: { type: string; keys: string[]; done: unknown; reward: unknown } | null;
  error: string | null;
}

function judgeEpisode(probe: Probe, wire: EpisodeWire | undefined, rows: readonly DataRow[]): Observed {
  if (!wire) return { reward: null, problems: ['not played: the session ended before this episode'] };
  const problems: string[] = [];
  if (wire.reset?.type === 'observation') {
    if (wire.reset.row_index !== probe.row) problems.push(`reset(index=${probe.row}) served row ${brief(wire.reset.row_index)}`);
    const question = rows[probe.row]?.question;
    if (question !== undefined && wire.reset.question !== question) problems.push(`reset served the question ${brief(wire.reset.question)}, not row ${probe.row}'s`);
    if (wire.reset.done !== false) problems.push('the episode was over right after reset');
    const leaked = wire.reset.keys.filter((key) => GOLD_KEYS.has(key));
    if (leaked.length > 0) problems.push(`the observation carries ${leaked.join(', ')}`);
  }
  if (wire.error) problems.push(wire.error);
  let reward: number | null = null;
  if (wire.step?.type === 'observation') {
    if (typeof wire.step.reward === 'number') reward = wire.step.reward;
    else problems.push(`step returned reward ${brief(wire.step.reward)}`);
    if (wire.step.done !== true) problems.push('the episode did not end after its one step');
  }
  return { reward, problems };
}

/**
 * The version range a package's pyproject.toml pins for a dependency
 * (`>=0.4,<0.5` of `"verifiers>=0.4,<0.5"`), or null when it pins none.
 */
async function pinnedRequirement(dir: string, name: string): Promise<string | null> {
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

async function runVerifiers(context: RunContext): Promise<Observed[]> {
  const { pkg, probes, rows, python, workdir, deadline, checks } = context;
  const input = JSON.stringify({ probes: probes.map((probe) => ({ row: probe.row, completion: probe.completion })) });
  const place: HelperPlace = { sandbox: context.sandbox, workdir, readable: [pkg.dir, ...context.pythonPaths], shareNet: false };
  const loader = await Helper.start(
    python,
    ['verifiers', pkg.dir, pkg.module, '--memory-mb', String(context.memoryMb), '--cpu-s', String(Math.ceil(deadline.seconds * 2))],
    workdir,
    scrubbedEnv(context.home, pkg.dir),
    place,
    input,
  );
  context.pids.push(loader.pid);
  let scored: SmokeEvent | null | typeof TIMED_OUT;
  try {
    scored = await Promise.race([deadline.race(loader.next(['scored', 'load_failed', 'missing', 'too_old']), TIMED_OUT), context.interruption]);
  } finally {
    await loader.stop();
  }
  if (scored === TIMED_OUT) {
    throw new GatekeptError('HARNESS_FAILED', `loading and scoring did not finish within --timeout-s ${deadline.seconds}`, { details: loader.stderrTail() });
  }
  if (scored?.event === 'load_failed') {
    const traceback = String(scored.traceback ?? '').split('\n').filter(Boolean).slice(-LOG_TAIL_LINES);
    throw new GatekeptError('ENV_START_FAILED', `loading the environment failed: ${String(scored.message)}`, { details: traceback });
  }
  if (scored?.event !== 'scored') throw helperFailure(loader, scored, python, 'verifiers', 'loading the environment failed');

  const loadedFrom = String(scored.module_file ?? '');
  const inside = loadedFrom !== '' && !path.relative(pkg.dir, loadedFrom).startsWith('..');
  checks.push({
    name: 'import',
    ok: inside,
    detail: inside
      ? `${pkg.module} imported from the package directory; ${scored.api === 'taskset' ? 'it exports' : 'load_environment() built'} a ${String(scored.environment)} (verifiers ${String(scored.version)})`
      : `${pkg.module} was imported from ${loadedFrom || 'nowhere'}, not from the package directory`,
  });
  const pinned = await pinnedRequirement(pkg.dir, 'verifiers');
  if (pinned !== null) {
    const version = String(scored.version);
    const fits = satisfies(version, pinned);
    checks.push({
      name: 'library',
      ok: fits,
      detail: fits
        ? `verifiers ${version} meets the package's requirement verifiers${pinned}`
        : `verifiers ${version} does not meet the package's requirement verifiers${pinned}: smoke it with a Python that has what it will be installed with`,
    });
  }
  const loadedRows = (scored.rows as DataRow[] | undefined) ?? [];
  const differing = rows.findIndex((row, index) => loadedRows[index]?.question !== row.question || loadedRows[index]?.answer !== row.answer);
  checks.push({
    name: 'dataset',
    ok: loadedRows.length === rows.length && differing < 0,
    detail:
      loadedRows.length !== rows.length
        ? `the eval dataset has ${loadedRows.length} rows; ${DATA_FILE_NAME} has ${rows.length}`
        : differing >= 0
          ? `eval dataset row ${differing} differs from ${DATA_FILE_NAME}`
          : `the eval dataset is the ${rows.length} bundled rows`,
  });
  const results = (scored.results as { reward: unknown; errors: string[]; error: string | null }[] | undefined) ?? [];
  const observed = probes.map((_, index): Observed => {
    const result = results[index];
    if (!result) return { reward: null, problems: ['not scored'] };
    const problems = [
      ...(result.error ? [result.error] : []),
      // Rubric turns a raising reward into 0.0; the log is the only trace.
      ...result.errors.map((message) => `logged: ${message}`),
    ];
    return { reward: typeof result.reward === 'number' ? result.reward : null, problems };
  });
  if (observed.some((episode) => episode.problems.length > 0)) context.log.push(...loader.stderrTail());
  return observed;
}

// ---------------------------------------------------------------------------

export async function smoke(options: SmokeOptions): Promise<SmokeReport> {
  const started = Date.now();
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const dir = path.resolve(cwd, options.dir);
  const timeoutS = options.timeoutS ?? DEFAULT_TIMEOUT_S;
  if (!(Number.isFinite(timeoutS) && timeoutS > 0)) throw new GatekeptError('BAD_ARGUMENT', 'the timeout must be a positive number of seconds');
  const python = resolvePython(options.python, cwd);
  const [runtime, sandbox] = await Promise.all([probePython(python, [3, 11]), openSandbox(options.sandbox ?? 'auto')]);

  const pkg = await resolvePackage(options.target, dir);
  const auditFile = options.audit ? path.resolve(cwd, options.audit) : path.join(dir, '..', '..', AUDIT_FILE_NAME);
  const audit = await loadAudit(auditFile);
  if (audit.package && audit.package.env_id !== pkg.envId) {
    throw new GatekeptError('BAD_ARGUMENT', `the audit ${auditFile} is for ${audit.package.env_id}, but the package is ${pkg.envId}`, {
      suggestion: 'pass the audit written with this package with --audit',
    });
  }
  const probes = await probesOf(audit, pkg, auditFile);
  const rows = await readRows(pkg);

  const checks: SmokeCheck[] = [];
  const golds = new Map(audit.target.golds.map((gold) => [gold.row, gold.answer]));
  const badRows = [...new Set(probes.map((probe) => probe.row))].filter((row) => golds.has(row) && rows[row]?.answer !== golds.get(row));
  checks.push({
    name: 'gold',
    ok: badRows.length === 0,
    detail:
      badRows.length === 0
        ? `the probed rows of ${DATA_FILE_NAME} hold the audited golds`
        : `rows ${badRows.join(', ')} of ${DATA_FILE_NAME} do not hold the audited gold (row ${badRows[0]}: ${brief(rows[badRows[0]!]?.answer ?? 'missing')}, audited ${brief(golds.get(badRows[0]!))})`,
  });
  if (audit.package?.verifier_sha256) {
    const actual = createHash('sha256').update(await readFile(pkg.verifierFile)).digest('hex');
    const same = actual === audit.package.verifier_sha256;
    checks.push({
      name: 'verifier',
      ok: same,
      detail: same
        ? `${path.relative(dir, pkg.verifierFile)} is the audited file (sha256 ${actual.slice(0, 12)}…)`
        : `${path.relative(dir, pkg.verifierFile)} is not the audited file (sha256 ${actual.slice(0, 12)}…, audited ${audit.package.verifier_sha256.slice(0, 12)}…)`,
    });
  }

  // Named after this process, so a later run can sweep what a killed run left.
  const workdir = await makeWorkDir(liveDirRegistry());
  const guard = guardSignals();
  const context: RunContext = {
    pkg,
    probes,
    rows,
    python: sandbox.kind === 'bwrap' ? runtime.executable : python,
    workdir,
    home: sandbox.kind === 'bwrap' ? SANDBOX_HOME : workdir,
    sandbox,
    pythonPaths: runtime.paths,
    deadline: new Deadline(timeoutS),
    memoryMb: options.memoryMb ?? DEFAULT_MEMORY_MB,
    checks,
    pids: [],
    log: [],
    interruption: guard.promise,
  };
  let observed: Observed[];
  try {
    observed = await (pkg.target === 'openenv' ? runOpenEnv(context) : runVerifiers(context));
  } finally {
    guard.dispose();
    for (const pid of context.pids) killGroup(pid, 'SIGKILL');
    await rm(workdir, { recursive: true, force: true });
    liveDirRegistry().delete(workdir);
  }

  const episodes: SmokeEpisode[] = probes.map((probe, index) => {
    const { reward, problems } = observed[index]!;
    const matches = reward !== null && Math.abs(reward - probe.expected) <= REWARD_TOLERANCE;
    return {
      kind: probe.kind,
      row: probe.row,
      attack_id: probe.attackId,
      severity: probe.severity,
      expected: probe.expected,
      observed: reward,
      ok: matches && problems.length === 0,
      problems,
    };
  });
  const passed = episodes.every((episode) => episode.ok) && checks.every((check) => check.ok);
  return {
    target: pkg.target,
    env_id: pkg.envId,
    package_dir: dir,
    audit_file: auditFile,
    python,
    passed,
    exit_code: passed ? EXIT.pass : EXIT.reject,
    checks,
    episodes,
    pids: context.pids,
    log: passed ? [] : [...new Set(context.log)],
    duration_ms: Date.now() - started,
  };
}

// ---------------------------------------------------------------------------
// Report

const formatReward = (value: number | null): string => (value === null ? '-' : String(Number(value.toPrecision(10))));

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

export function formatSmokeReport(report: SmokeReport): string {
  const lines = [`smoke ${report.target} ${report.env_id}: ${report.episodes.length} episodes from ${path.basename(report.audit_file)}`];
  for (const check of report.checks) lines.push(`  ${check.ok ? 'ok  ' : 'FAIL'} ${pad(check.name, 9)} ${check.detail}`);
  lines.push('');
  const header = ['kind', 'row', 'attack', 'expected', 'observed', 'ok', 'attack severity'];
  const body = report.episodes.map((episode) => [
    episode.kind,
    String(episode.row),
    episode.attack_id ?? '-',
    formatReward(episode.expected),
    formatReward(episode.observed),
    episode.ok ? 'ok' : 'DIFF',
    episode.severity ?? '-',
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...body.map((row) => row[column]!.length)));
  lines.push(header.map((title, column) => pad(title, widths[column]!)).join('  ').trimEnd());
  report.episodes.forEach((episode, index) => {
    lines.push(body[index]!.map((cell, column) => pad(cell, widths[column]!)).join('  ').trimEnd());
    for (const problem of episode.problems) lines.push(`    ${problem}`);
  });
  if (report.episodes.some((episode) => episode.kind === 'attack')) {
    // A severe attack next to "ok" reads like a miss; it is a replay of what the gate already judged.
    lines.push(
      '',
      'attack episodes replay the most severe attacks the gate tried; ok means the package scored each exactly as the gate did.',
      'The severity is the attack\'s, not a finding: an attack the gate did not count as a hack is rewarded at most at the honest',
      'level (reward-overflow repeats the correct answer, so the honest reward is expected; only more would be a hack).',
    );
  }
  if (report.log.length > 0) {
    lines.push('', 'package stderr (tail):', ...report.log.map((line) => `  ${line}`));
  }
  const differing = report.episodes.filter((episode) => !episode.ok).length;
  const failedChecks = report.checks.filter((check) => !check.ok).length;
  lines.push('');
  if (report.passed) {
    lines.push(`smoke PASS: all ${report.episodes.length} episodes scored as audited (${(report.duration_ms / 1000).toFixed(1)}s)`);
  } else {
    const parts = [
      ...(differing > 0 ? [`${differing} of ${report.episodes.length} episodes differ from the audit`] : []),
      ...(failedChecks > 0 ? [`${failedChecks} check${failedChecks === 1 ? '' : 's'} failed`] : []),
    ];
    lines.push(`smoke FAIL: ${parts.join('; ')}`);
  }
  return lines.join('\n');
}
