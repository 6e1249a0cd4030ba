import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { GatekeptError } from '../errors.js';
import { registerGroup, releaseGroup, killGroup } from './cleanup.js';
import { escapeControl } from './escape-control.js';
import { bwrapCommand, type BwrapLaunch, SECCOMP_FD, type Sandbox, type SandboxLayout } from './sandbox.js';

/**
 * The one way gatekept runs a Python process of its own (the verifier
 * harness, smoke's helpers): as the leader of a fresh process group, inside
 * the sandbox when there is one, registered so that no exit path leaves it
 * running, with bounded tails of its stdout and stderr, and optionally the
 * two protocol pipes (requests on its fd 3, replies on its fd 4) that keep
 * replies apart from whatever the code it runs prints.
 */

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process was not seen to end but its host was lost (a Ray actor that died): the call is run again elsewhere. */
  lost?: string;
}

export function describeExit(info: ExitInfo): string {
  if (info.lost) return `was lost with its host (${info.lost})`;
  return info.signal !== null ? `was killed by ${info.signal}` : `exited with code ${info.code ?? '?'}`;
}

/** Keeps the last `cap` bytes of a stream and drops the rest. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly cap: number) {}

  push(chunk: Buffer | string): void {
    if (this.cap === 0) return;
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (bytes.length >= this.cap) {
      this.chunks = [bytes.subarray(bytes.length - this.cap)];
      this.size = this.cap;
      return;
    }
    this.chunks.push(bytes);
    this.size += bytes.length;
    while (this.size > this.cap) {
      const first = this.chunks[0]!;
      const excess = this.size - this.cap;
      if (first.length <= excess) {
        this.chunks.shift();
        this.size -= first.length;
      } else {
        this.chunks[0] = first.subarray(excess);
        this.size -= excess;
      }
    }
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

export function tailLines(text: string, count: number): string[] {
  return text
    .split('\n')
    .map((line) => line.trimEnd())
    .filter((line) => line.length > 0)
    .slice(-count);
}

/** Cuts a text stream into complete lines; a trailing partial line waits for its newline. */
export class LineFramer {
  private partial = '';

  constructor(private readonly emit: (lines: string[]) => void) {}

  push(chunk: string): void {
    let start = 0;
    let newline = chunk.indexOf('\n');
    if (newline < 0) {
      this.partial += chunk;
      return;
    }
    const lines: string[] = [];
    while (newline >= 0) {
      let line = chunk.slice(start, newline);
      if (this.partial) {
        line = this.partial + line;
        this.partial = '';
      }
      if (line.length > 0) lines.push(line);
      start = newline + 1;
      newline = chunk.indexOf('\n', start);
    }
    if (start < chunk.length) this.partial = chunk.slice(start);
    if (lines.length > 0) this.emit(lines);
  }
}

export interface PythonProcessOptions {
  python: string;
  /** The script and its arguments. */
  args: readonly string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Text to send on stdin (closed afterwards); stdin is /dev/null without it. */
  input?: string;
  /** Open the request (fd 3) and reply (fd 4) pipes. */
  protocol?: boolean;
  /** Bytes of stdout and of stderr kept for diagnostics. */
  outputCapBytes: number;
  minimumVersion: string;
  sandbox?: { sandbox: Sandbox; layout: SandboxLayout };
}

export class PythonProcess {
  readonly pid: number;
  readonly stdout: TailBuffer;
  readonly stderr: TailBuffer;
  /** Set as soon as the process itself has exited. */
  exitInfo: ExitInfo | null = null;
  readonly exited: Promise<ExitInfo>;
  /** Resolves once the process has exited and its stdout and stderr are drained. */
  readonly closed: Promise<void>;
  readonly requests: Writable | null;
  readonly replies: Readable | null;
  /** For callers that read events from stdout as well (its tail is kept either way). */
  readonly stdoutStream: Readable | null;

  private constructor(
    private readonly child: ChildProcess,
    pid: number,
    outputCap: number,
    sandboxed: boolean,
  ) {
    this.pid = pid;
    this.stdout = new TailBuffer(outputCap);
    this.stderr = new TailBuffer(outputCap);
    this.requests = (child.stdio[3] as Writable | null | undefined) ?? null;
    this.replies = (child.stdio[4] as Readable | null | undefined) ?? null;
    this.stdoutStream = child.stdout;
    registerGroup(pid);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitInfo = sandboxed ? unwrapSandboxExit({ code, signal }) : { code, signal };
        // Anything it left running in its group (or sandbox) goes with it.
        killGroup(pid);
        releaseGroup(pid);
        resolve(this.exitInfo);
      });
    });
    this.closed = new Promise((resolve) => child.once('close', () => resolve()));
    child.stdout?.on('data', (chunk: Buffer) => this.stdout.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => this.stderr.push(chunk));
    for (const stream of [child.stdin, child.stdout, child.stderr, this.requests, this.replies]) {
      stream?.on('error', () => {
        // EPIPE and friends: the exit says what happened
      });
    }
  }

  static async start(options: PythonProcessOptions): Promise<PythonProcess> {
    const launch = await launchCommand(options);
    // bubblewrap reads its seccomp filter from fd SECCOMP_FD and closes it.
    // Our copy is opened close-on-exec and closed as soon as the child exists
    // (spawn returns after the exec), so no other process inherits it.
    try {
      const started = await PythonProcess.spawnLaunched(options, launch);
      // The overlay namespace it was launched in is kept while it runs.
      if ('release' in launch && launch.release) void started.exited.then(launch.release);
      return started;
    } catch (error) {
      if ('release' in launch) launch.release?.();
      throw error;
    }
  }

  private static async spawnLaunched(options: PythonProcessOptions, launch: BwrapLaunch): Promise<PythonProcess> {
    const seccomp = launch.seccompFile === null ? null : openSync(launch.seccompFile, 'r');
    const stdio: ('pipe' | 'ignore' | number)[] = [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'];
    if (options.protocol) stdio.push('pipe', 'pipe');
    if (seccomp !== null) {
      while (stdio.length < SECCOMP_FD) stdio.push('ignore');
      stdio.push(seccomp);
    }
    let child: ChildProcess;
    try {
      // node:child_process rather than execa: execa guesses a direction for
      // extra fds and treats 'pipe' on fd 3 as an output, but fd 3 is our
      // request channel into the worker.
      child = spawn(launch.command, launch.args, {
        cwd: options.cwd,
        env: options.env,
        stdio,
        detached: true,
        windowsHide: true,
      });
    } finally {
      if (seccomp !== null) closeSync(seccomp);
    }
    try {
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'EACCES' || code === 'ENOTDIR' || code === 'EISDIR') {
        throw new GatekeptError('PYTHON_NOT_FOUND', `cannot run Python interpreter '${options.python}' (${code})`, {
          suggestion: `install Python ${options.minimumVersion} or newer, or pass its path with --python`,
          cause: error,
        });
      }
      throw new GatekeptError('HARNESS_FAILED', `starting '${options.python}' failed: ${String(error)}`, { cause: error });
    }
    if (child.pid === undefined || (options.protocol && (!child.stdio[3] || !child.stdio[4]))) {
      child.kill('SIGKILL');
      throw new GatekeptError('HARNESS_FAILED', 'the Python process started without its pipes');
    }
    const started = new PythonProcess(child, child.pid, options.outputCapBytes, launch.command !== options.python);
    if (options.input !== undefined) child.stdin!.end(options.input);
    return started;
  }

  get done(): boolean {
    return this.exitInfo !== null;
  }

  /** Let an idle process not keep Node alive; the exit hook still ends it. */
  unref(): void {
    this.child.unref();
    for (const stream of [this.child.stdout, this.child.stderr, this.requests, this.replies]) {
      (stream as unknown as { unref?: () => void } | null)?.unref?.();
    }
  }

  exitDescription(): string {
    return this.exitInfo ? describeExit(this.exitInfo) : 'is still running';
  }

  /** The last lines of stderr, control characters escaped: they go to a terminal. */
  stderrTail(lines: number): string[] {
    return tailLines(escapeControl(this.stderr.text()), lines);
  }

  /** SIGKILL the whole group: the process and anything it started. */
  kill(): void {
    killGroup(this.pid);
    if (this.exitInfo === null) {
      try {
        this.child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  }

  /** Ask the group to stop (SIGTERM), then kill what is left after `graceMs`. */
  async stop(graceMs: number): Promise<void> {
    if (this.exitInfo === null && graceMs > 0) {
      killGroup(this.pid, 'SIGTERM');
      await waitFor(this.exited, graceMs);
    }
    this.kill();
    await waitFor(this.exited, Math.max(graceMs, 1000));
    await this.groupGone(Math.max(graceMs, 1000));
  }

  /**
   * A SIGKILL is delivered asynchronously, and a sandbox's PID namespace takes
   * a moment to tear down: wait (briefly) until no process of the group is
   * left, so that a caller who stopped a process can rely on it being gone.
   */
  private async groupGone(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      try {
        process.kill(-this.pid, 0);
      } catch {
        return;
      }
      killGroup(this.pid);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

/** The command line that runs the interpreter as given: in the sandbox when there is one. */
export async function launchCommand(options: Pick<PythonProcessOptions, 'python' | 'args' | 'sandbox'>): Promise<BwrapLaunch> {
  const pythonArgs = ['-B', '-X', 'utf8', ...options.args];
  return options.sandbox
    ? await bwrapCommand(options.sandbox.sandbox, options.sandbox.layout, options.python, pythonArgs)
    : { command: options.python, args: pythonArgs, seccompFile: null };
}

/** bubblewrap reports a child killed by signal N as exit status 128 + N, like a shell. */
function unwrapSandboxExit(info: ExitInfo): ExitInfo {
  if (info.code === null || info.code <= 128) return info;
  const number = info.code - 128;
  const name = (Object.keys(constants.signals) as NodeJS.Signals[]).find((key) => constants.signals[key] === number);
  return name ? { code: null, signal: name } : info;
}

/** Resolves when `promise` settles or after `ms`, holding Node open meanwhile. */
export async function waitFor(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      promise.then(
        () => undefined,
        () => undefined,
      ),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms);
      }),
    ]);
  } finally {
    if (timer) clearTimeout(timer);
  }
}
