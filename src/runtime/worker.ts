/**
 * One Python worker: the harness process, reading requests on its fd 3 and
 * answering on fd 4, so whatever the verifier prints on stdout/stderr never
 * mixes with replies.
 */
import type { Readable, Writable } from 'node:stream';
import { LineFramer, PythonProcess, waitFor, type ExitInfo, type TailBuffer } from './python-process.js';
import { stoppedInTree } from './process-tree.js';
import { MIN_PYTHON, versionText } from './python-minimum.js';
import type { Sandbox, SandboxLayout } from './sandbox.js';
import type { NormalisedOptions } from './session-options.js';
import { LongTextCodec } from './text-codec.js';

/** How long a killed worker's exit is waited for. */
export const KILL_WAIT_MS = 3000;
/** How long an unsandboxed supervisor gets to sweep what the verifier left running. */
const SWEEP_WAIT_MS = 2000;
/** After the worker exits, replies it already wrote may still be in flight. */
const REPLY_DRAIN_MS = 1000;

/**
 * The process a worker speaks to: a local PythonProcess, or one an actor of
 * a Ray cluster runs on its node (see ray/remote-process.ts), whose pipes are
 * tunnelled. Either way the protocol, its checks and its timeouts are this
 * side's.
 */
export interface WorkerProcess {
  readonly requests: Writable | null;
  readonly replies: Readable | null;
  readonly exited: Promise<ExitInfo>;
  readonly stdout: TailBuffer;
  readonly stderr: TailBuffer;
  unref(): void;
  kill(): void;
  /** Whether a process of its tree is stopped (SIGSTOP): its silence is then not the verifier's time. */
  isStopped(): boolean;
}

/** Starts the worker command of a launch somewhere; the local one runs it here. */
export interface WorkerLauncher {
  start(options: NormalisedOptions, launch: WorkerLaunch): Promise<WorkerProcess>;
  /** Held by each session that launches through it (see PythonSession). */
  retain(): void;
  release(): Promise<void>;
}

async function startLocal(options: NormalisedOptions, launch: WorkerLaunch): Promise<WorkerProcess> {
  const proc = await PythonProcess.start({
    python: options.python,
    args: [launch.harness],
    cwd: launch.cwd,
    env: launch.env,
    protocol: true,
    outputCapBytes: options.outputCapBytes,
    minimumVersion: versionText(MIN_PYTHON),
    ...(launch.sandbox ? { sandbox: launch.sandbox } : {}),
  });
  return Object.assign(proc, { isStopped: () => stoppedInTree(proc.pid) });
}

interface WorkerHandlers {
  lines: (lines: string[]) => void;
  exit: (info: ExitInfo) => void;
}

/** The harness process plus the request/reply protocol around it. */
export class Worker {
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
    readonly proc: WorkerProcess,
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

  static async start(options: NormalisedOptions, launch: WorkerLaunch, launcher: WorkerLauncher | null = null): Promise<Worker> {
    const proc = launcher ? await launcher.start(options, launch) : await startLocal(options, launch);
    return new Worker(proc, launch.sandbox !== null);
  }

  /** Whether a process of the worker's tree is stopped (SIGSTOP or the like). */
  isStopped(): boolean {
    return this.proc.isStopped();
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

export interface WorkerLaunch {
  /** The harness: compiled by this interpreter when it could be (see runtime-cache.ts), else its source. */
  harness: string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  sandbox: { sandbox: Sandbox; layout: SandboxLayout } | null;
}
