import path from 'node:path';
import { withinHardBound } from '../runtime/hard-bound.js';
import { AUDIT_FILE_NAME } from '../pack/pack.js';
import { EXIT, GatekeptError } from '../errors.js';
import { killGroup, liveDirRegistry } from '../runtime/cleanup.js';
import { probePython, resolvePython } from '../runtime/resolve-python.js';
import { openSandbox, SANDBOX_HOME, type SandboxMode } from '../runtime/sandbox.js';
import { makeWorkDir, removeWorkDir } from '../runtime/stale-dirs.js';
import { checkAgainstAudit, loadAudit, probesOf, type Probe } from './audit.js';
import { minimumPythonFor } from './helper.js';
import { runOpenEnv } from './openenv.js';
import { readRows, resolvePackage } from './package.js';
import type { SmokeEpisode, SmokeReport, SmokeTarget } from './report.js';
import { Deadline, guardSignals, type Observed, type RunContext } from './run-context.js';
import { runVerifiers } from './verifiers.js';

/**
 * `gatekept smoke`: run an emitted package the way its users will (the
 * OpenEnv server over loopback, or the verifiers environment's rubric) and
 * replay the completions the gate scored, expecting the same rewards. The
 * gate audited a function; this checks the package around it still calls
 * that function the same way.
 *
 * package.ts reads the package, audit.ts the audit and its probes, openenv.ts
 * and verifiers.ts run the package with its library through helper.ts's
 * processes, and report.ts prints the result.
 */

export { formatSmokeReport, type SmokeCheck, type SmokeEpisode, type SmokeReport, type SmokeTarget } from './report.js';

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

const REWARD_TOLERANCE = 1e-9;
const DEFAULT_TIMEOUT_S = 120;
const DEFAULT_MEMORY_MB = 4096;

export async function smoke(options: SmokeOptions): Promise<SmokeReport> {
  const timeoutS = options.timeoutS ?? DEFAULT_TIMEOUT_S;
  if (!(Number.isFinite(timeoutS) && timeoutS > 0)) throw new GatekeptError('BAD_ARGUMENT', 'the timeout must be a positive number of seconds');
  // Its own limit is kept inside the run; this one holds whatever the package's processes do.
  return withinHardBound(timeoutS * 1000 + SMOKE_BOUND_SLACK_MS, 'smoke', () => smokeWithin(options, timeoutS));
}

/** Time past the run's own limit for taking its processes down. */
const SMOKE_BOUND_SLACK_MS = 30_000;

async function smokeWithin(options: SmokeOptions, timeoutS: number): Promise<SmokeReport> {
  const started = Date.now();
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const dir = path.resolve(cwd, options.dir);
  const python = resolvePython(options.python, cwd);
  const [runtime, sandbox] = await Promise.all([probePython(python, minimumPythonFor(options.target)), openSandbox(options.sandbox ?? 'auto')]);

  // 1. The package and the audit it was packed with.
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

  // 2. Its files against the audit.
  const checks = await checkAgainstAudit(audit, pkg, rows, probes);

  // 3. The package run for real with its library; every process it started is gone after.
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
    await removeWorkDir(workdir);
    liveDirRegistry().delete(workdir);
  }

  // 4. Each episode against the reward the gate saw.
  const episodes = probes.map((probe, index) => judged(probe, observed[index]!));
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

function judged(probe: Probe, { reward, problems }: Observed): SmokeEpisode {
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
}
