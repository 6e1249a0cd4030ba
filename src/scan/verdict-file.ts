import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { GatekeptError } from '../errors.js';
import type { Judged } from './classify.js';
import type { Rollout } from './read-rollouts.js';

/**
 * `scan --out verdicts.jsonl`: one JSON line per rollout, as each is judged,
 * written as the scan goes through a stream (nothing is kept but the
 * stream's buffer, and a full buffer holds the scan back). The lines go to
 * a temporary name beside the target and are renamed onto it when the scan
 * ends; a scan that fails leaves no file, not half of one.
 */

/** One rollout's line: where it is in the input, what it was judged, and the golds it was paid under. */
export interface VerdictLine {
  id: string;
  /** 1-based line of the input file. */
  line: number;
  /** Only where the input records one. */
  step?: number;
  kind: Judged['kind'];
  /** The golds it was paid under, its own first; empty when it was not paid. */
  golds: string[];
  shape: Judged['shape'];
}

export class VerdictFile {
  /** A write that failed (a full disk): the next write or the finish reports it. */
  private failure: unknown = null;

  private constructor(
    private readonly target: string,
    private readonly partial: string,
    private readonly stream: WriteStream,
  ) {
    stream.on('error', (error) => {
      this.failure ??= error;
    });
  }

  static async open(file: string): Promise<VerdictFile> {
    const target = path.resolve(file);
    const partial = path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}.partial`);
    try {
      await mkdir(path.dirname(target), { recursive: true });
      const stream = createWriteStream(partial, { flags: 'w' });
      await once(stream, 'open');
      return new VerdictFile(target, partial, stream);
    } catch (error) {
      await rm(partial, { force: true });
      throw unwritable(file, error);
    }
  }

  /** Append one rollout's line; waits while the stream's buffer is full. */
  async write(rollout: Rollout, judged: Judged): Promise<void> {
    const line: VerdictLine = {
      id: rollout.id,
      line: rollout.line,
      ...(rollout.step === null ? {} : { step: rollout.step }),
      kind: judged.kind,
      golds: judged.rewardedUnder,
      shape: judged.shape,
    };
    if (this.failure !== null) throw unwritable(this.target, this.failure);
    // once() rejects if the stream fails while the scan waits for it to drain.
    if (!this.stream.write(`${JSON.stringify(line)}\n`))
      await once(this.stream, 'drain').catch((error: unknown) => Promise.reject(unwritable(this.target, error)));
  }

  /** Flush and put the file in place; its absolute path. */
  async finish(): Promise<string> {
    try {
      if (this.failure !== null) throw this.failure;
      this.stream.end();
      await once(this.stream, 'finish');
      await rename(this.partial, this.target);
    } catch (error) {
      await this.abort();
      throw unwritable(this.target, error);
    }
    return this.target;
  }

  /** Drop what was written: the scan did not finish. */
  async abort(): Promise<void> {
    this.stream.destroy();
    await rm(this.partial, { force: true });
  }
}

function unwritable(file: string, error: unknown): GatekeptError {
  return new GatekeptError('OUT_DIR_UNWRITABLE', `cannot write the verdicts ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, {
    suggestion: 'choose an --out path in a directory you can write to',
    cause: error,
  });
}
