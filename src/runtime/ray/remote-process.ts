import { PassThrough, Writable } from 'node:stream';
import { type ExitInfo, TailBuffer } from '../python-process.js';
import type { WorkerProcess } from '../worker.js';

/**
 * A worker process an actor runs on its node, as the local Worker sees it:
 * what is written to its requests goes to the actor's fd 3 of the worker,
 * what the worker writes on its fd 4 comes out of replies, and its exit (or
 * the loss of its actor) ends both.
 */
export class RemoteProcess implements WorkerProcess {
  readonly requests: Writable;
  readonly replies = new PassThrough({ encoding: 'utf8' });
  readonly stdout: TailBuffer;
  readonly stderr: TailBuffer;
  readonly exited: Promise<ExitInfo>;
  private exitInfo: ExitInfo | null = null;
  private resolveExit!: (info: ExitInfo) => void;

  constructor(
    outputCapBytes: number,
    send: (data: string) => void,
    private readonly killRemote: () => void,
  ) {
    this.stdout = new TailBuffer(outputCapBytes);
    this.stderr = new TailBuffer(outputCapBytes);
    this.exited = new Promise((resolve) => {
      this.resolveExit = resolve;
    });
    this.requests = new Writable({
      decodeStrings: false,
      write: (chunk: string | Buffer, _encoding, done) => {
        if (this.exitInfo === null) send(typeof chunk === 'string' ? chunk : chunk.toString('utf8'));
        done();
      },
    });
  }

  /** Bytes the worker wrote on its reply pipe. */
  data(text: string): void {
    if (this.exitInfo === null) this.replies.write(text);
  }

  /** The worker ended (or its actor was lost), with the tails of what it printed. */
  exit(info: ExitInfo, stdout: string, stderr: string): void {
    if (this.exitInfo !== null) return;
    this.exitInfo = info;
    this.stdout.push(stdout);
    this.stderr.push(stderr);
    this.replies.end();
    this.requests.destroy();
    this.resolveExit(info);
  }

  unref(): void {
    // Nothing of it holds Node's event loop: the driver's pipes are unref'd.
  }

  kill(): void {
    if (this.exitInfo === null) this.killRemote();
  }

  /** Its processes are on another node's kernel: a stopped one there shows as a timeout. */
  isStopped(): boolean {
    return false;
  }
}
