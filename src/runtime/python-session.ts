/**
 * The one owner of the Python worker that runs a verifier: it starts the
 * worker, streams batches of calls to it and reads the replies in order.
 * Hangs the worker cannot interrupt itself and crashes are handled here by
 * killing its process group and starting a fresh worker.
 */
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { skippedResult, type EvalRequest, type EvalResult, type EvaluateOptions, type VerifierInfo, type VerifierSession } from '../calls.js';
import { GatekeptError } from '../errors.js';
import { HARNESS_PATH } from '../paths.js';
import { liveDirRegistry } from './cleanup.js';
import { earlyExit, importTimeout, loadFailure } from './load-failure.js';
import { waitFor } from './python-process.js';
import { probePython } from './resolve-python.js';
import { writeCompiled } from './runtime-cache.js';
import { hopedLaunch, hopedSandbox, openSandbox, sameSandbox, SANDBOX_HOME, SANDBOX_TMP, type Sandbox, type SandboxLayout } from './sandbox.js';
import { IMPORT_WALL_FACTOR, normaliseOptions, type NormalisedOptions, type SessionOptions } from './session-options.js';
import { makeWorkDir, removeWorkDirSync } from './stale-dirs.js';
import { protocolError, readReady, readReply, RequestWriter, STRAY_EFFECT, tampered, type WorkerReply } from './wire.js';
import { KILL_WAIT_MS, Worker, type WorkerLaunch, type WorkerLauncher } from './worker.js';
import { pythonEnv } from './python-env.js';
import {
  CALL_GRACE_MS,
  crashedResult,
  HostLost,
  MAX_HOST_LOSSES,
  MAX_RESTARTS,
  readyDeadlineMs,
  roundMs,
  type SegmentOutcome,
  stoppedFailure,
  timeoutResult,
} from './session-outcomes.js';

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
  private hostLosses = 0;
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
    private readonly launcher: WorkerLauncher | null = null,
  ) {
    launcher?.retain();
    const home = path.join(workdir, 'home');
    const tmp = path.join(workdir, 'tmp');
    const isolated = sandbox.kind === 'bwrap';
    this.inside = isolated ? { home: SANDBOX_HOME, tmp: SANDBOX_TMP } : { home, tmp };
    const layout: SandboxLayout = { scratch: workdir, readable };
    this.launchSpec = {
      harness,
      cwd: isolated ? workdir : home,
      // No PYTHONPATH: the verifier's import path comes with the init request,
      // once the harness has imported its own modules, which a directory of
      // the user's could otherwise shadow.
      env: pythonEnv({ ...this.inside, pythonpath: [] }),
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
    removeWorkDirSync(this.workdir);
    liveDirRegistry().delete(this.workdir);
    await this.launcher?.release();
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
          await waitFor(prepared.worker.done, KILL_WAIT_MS);
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
      if (outcome.kind === 'lost') {
        // Not the verifier's doing: the call in flight runs again on a worker elsewhere.
        start = outcome.index;
        await this.restart(false);
        continue;
      }
      if (outcome.kind !== 'stopped') {
        results[outcome.index] = outcome.kind === 'timeout' ? timeoutResult(this.options.callTimeoutMs, outcome.ms) : crashedResult(outcome.exit, outcome.ms);
      }
      start = outcome.index + 1;
      if (stopOnTimeout) {
        for (let index = start; index < requests.length; index += 1) results[index] = skippedResult();
        // The worker still holds the rest of the batch in its pipe and would
        // run it; a fresh one is started when the next batch arrives.
        worker.kill();
        await waitFor(worker.done, KILL_WAIT_MS);
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

  private async restart(countsAsRestart = true): Promise<void> {
    this.assertOpen();
    const old = this.worker;
    this.worker = null;
    // Batches sent ahead to the old worker are encoded and sent again when they run.
    this.preparedFor = null;
    if (old) {
      old.kill();
      await waitFor(old.done, KILL_WAIT_MS);
    }
    if (!countsAsRestart && ++this.hostLosses > MAX_HOST_LOSSES) {
      throw new GatekeptError('HARNESS_FAILED', `the hosts of the verifier's workers were lost more than ${MAX_HOST_LOSSES} times in one session; giving up`, {
        suggestion: 'check the health of the Ray cluster (`ray status`), or run without --ray',
      });
    }
    if (countsAsRestart) this.restarts += 1;
    if (this.restarts > MAX_RESTARTS) {
      throw new GatekeptError('HARNESS_FAILED', `the verifier crashed or hung more than ${MAX_RESTARTS} times in one session; giving up`, {
        suggestion: 'run the verifier on a few of the failing completions by hand to see why it dies',
      });
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
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.launchOnce(warmUp);
      } catch (error) {
        // A host lost while the worker started says nothing of the verifier: start it on another.
        if (!(error instanceof HostLost) || attempt >= MAX_HOST_LOSSES) throw error instanceof HostLost ? error.failure : error;
      }
    }
  }

  private async launchOnce(warmUp: boolean): Promise<{ worker: Worker; info: VerifierInfo }> {
    const options = this.options;
    const worker = await Worker.start(options, this.launchSpec, this.launcher);
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
      const timer = setTimeout(
        () => {
          const stopped = worker.isStopped();
          worker.kill();
          settle(() => reject(stopped ? stoppedFailure('while the verifier loaded') : importTimeout(options)));
        },
        readyDeadlineMs(options.importTimeoutMs, options.callTimeoutMs),
      );
      worker.setHandlers({
        lines: (lines) => {
          const line = lines[0]!;
          try {
            if (lines.length > 1) throw protocolError('more than one reply to init', lines[1]!);
            const ready = readReady(line);
            if ('failure' in ready) throw loadFailure(ready.failure, options);
            settle(() => resolve(ready.info));
          } catch (error) {
            settle(() => reject(error));
          }
        },
        exit: (info) => settle(() => reject(info.lost ? new HostLost(earlyExit(info, worker, options)) : earlyExit(info, worker, options))),
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
        // Silent past its time: a verifier that is merely slow, or a process
        // of the audit stopped so that it cannot answer. The first is a
        // timeout; the second leaves nothing to vouch for.
        if (worker.isStopped()) return fail(stoppedFailure('during a call'));
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
          if (exit.lost) return settle(() => resolve({ kind: 'lost', index: next }));
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

/**
 * A session whose workers are started by `launcher` (a Ray cluster's actors,
 * see ray/ray-backend.ts) instead of here; null starts them here.
 */
export async function openVerifierSession(options: SessionOptions, launcher: WorkerLauncher | null = null): Promise<VerifierSession> {
  if (launcher) {
    // The hoped-for start below is a local launch's shortcut; the probe's
    // answer is what the launch spec is built from.
    const normalised = normaliseOptions(options);
    return startSession(normalised, await openSandbox(normalised.sandbox), launcher);
  }
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
      await hopeful.then(
        (session) => session.close(),
        () => undefined,
      );
      throw error;
    }
    if (sameSandbox(sandbox, hoped)) return hopeful;
    await hopeful.then(
      (session) => session.close(),
      () => undefined,
    );
    return startSession(normalised, sandbox);
  }
  return startSession(normalised, await probing);
}

async function startSession(normalised: NormalisedOptions, sandbox: Sandbox, launcher: WorkerLauncher | null = null): Promise<VerifierSession> {
  const runtime = await probePython(normalised.python);
  const workdir = await makeWorkDir(liveDirRegistry());
  const readable = [
    ...runtime.paths,
    ...normalised.pythonpath,
    ...normalised.readable,
    ...(normalised.target.kind === 'file' ? [path.dirname(normalised.target.path)] : []),
  ];
  // In the sandbox, the interpreter's own executable rather than a wrapper
  // around it (a pyenv shim needs machinery the sandbox hides); without it,
  // the interpreter exactly as given.
  const python = sandbox.kind === 'bwrap' ? runtime.executable : normalised.python;
  // The compiled harness as this process read and checked it, written into
  // the run's own directory: workers never load a file in the cache.
  const harness = runtime.scripts ? writeCompiled(runtime.scripts, path.join(workdir, 'compiled')) : HARNESS_PATH;
  const session = new PythonSession({ ...normalised, python }, workdir, sandbox, readable, harness, launcher);
  try {
    await session.start();
  } catch (error) {
    await session.close();
    throw error;
  }
  return session;
}
