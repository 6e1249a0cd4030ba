import path from 'node:path';
import { GatekeptError } from '../errors.js';
import { PACKAGE_ROOT } from '../paths.js';
import { OFFLINE_HUB, pythonEnv } from '../runtime/python-env.js';
import { LineFramer, PythonProcess } from '../runtime/python-process.js';
import { MIN_PYTHON, MIN_PYTHON_VERIFIERS, type PythonVersion, versionText } from '../runtime/python-minimum.js';
import { SANDBOX_HOME, SANDBOX_TMP, type Sandbox } from '../runtime/sandbox.js';
import type { SmokeTarget } from './report.js';

/**
 * python/smoke.py's modes as processes, each in its own group, all killed on
 * the way out: the events they print, the environment they get, and the
 * errors a helper that ended without its answer turns into.
 */

const SMOKE_SCRIPT = path.join(PACKAGE_ROOT, 'python', 'smoke.py');
const EVENT_PREFIX = 'GATEKEPT_SMOKE ';
export const LOG_TAIL_LINES = 25;
const STDERR_CAP = 64 * 1024;
const STOP_GRACE_MS = 3000;
const EXIT_DRAIN_MS = 500;

/** One `GATEKEPT_SMOKE <json>` line a helper printed. */
export interface SmokeEvent {
  event: string;
  [key: string]: unknown;
}

/** Where a helper runs: the sandbox (if any) and the host directories it may write. */
/** The oldest Python a target runs on: OpenEnv's is the harness's own, verifiers needs a newer one. */
export function minimumPythonFor(target: SmokeTarget): PythonVersion {
  return target === 'verifiers' ? MIN_PYTHON_VERIFIERS : MIN_PYTHON;
}

export interface HelperPlace {
  sandbox: Sandbox;
  /** Host working directory: the helper's home; `tmp/` inside it is its temp directory. */
  workdir: string;
  /** Host paths the helper must read (the package). */
  readable: string[];
}

/** One of smoke.py's modes in a runtime PythonProcess, reading the events it prints on stdout. */
export class Helper {
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
      minimumVersion: versionText(minimumPythonFor(args[0] === 'verifiers' ? 'verifiers' : 'openenv')),
      ...(isolated
        ? {
            sandbox: {
              sandbox: place.sandbox,
              layout: { scratch: place.workdir, readable: place.readable },
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

/** A helper's environment (see pythonEnv): the packages bundle their data, so nothing may be fetched. */
export function scrubbedEnv(home: string, pythonpath: readonly string[]): NodeJS.ProcessEnv {
  const tmp = home === SANDBOX_HOME ? SANDBOX_TMP : path.join(home, 'tmp');
  return pythonEnv({ home, tmp, pythonpath, extra: OFFLINE_HUB });
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
    {
      suggestion: `pip install ${install.join(' ')} into that interpreter (\`${python} -m pip install ${install.join(' ')}\`), or pass --python with one that has it`,
    },
  );
}

function tooOld(event: SmokeEvent, python: string): GatekeptError {
  return new GatekeptError('PYTHON_TOO_OLD', `'${python}' is Python ${String(event.version)}; the package needs ${String(event.minimum)} or newer`, {
    suggestion: 'pass a newer interpreter with --python',
  });
}

/** Turn a helper that ended without its answer into the error that explains it. */
export function helperFailure(proc: Helper, event: SmokeEvent | null, python: string, target: SmokeTarget, what: string): GatekeptError {
  if (event?.event === 'missing') return missingPackage(event, python, target);
  if (event?.event === 'too_old') return tooOld(event, python);
  return new GatekeptError('ENV_START_FAILED', `${what}: the Python process ${proc.exitDescription()}`, { details: proc.stderrTail() });
}
