import type { Io } from './io.js';

/**
 * A progress line on a terminal for audits longer than a second. Nothing is
 * drawn when stderr is not a terminal, so logs and pipes stay clean.
 */

export interface Progress {
  update: (done: number, total: number) => void;
  done: () => void;
}

const DELAY_MS = 1000;
const WIDTH = 30;

export function createProgress(io: Io, label: string): Progress | undefined {
  if (!io.stderrIsTty) return undefined;
  const started = Date.now();
  let drawn = false;
  let finished = false;
  let last = 0;
  return {
    update(done, total) {
      const now = Date.now();
      if (finished || now - started < DELAY_MS || (now - last < 100 && done < total)) return;
      last = now;
      const fraction = total === 0 ? 1 : done / total;
      const filled = Math.round(fraction * WIDTH);
      const rate = Math.round(done / Math.max((now - started) / 1000, 1e-3));
      io.stderr(`\r${label} [${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ${done}/${total} (${rate}/s)`);
      drawn = true;
    },
    done() {
      if (finished) return;
      finished = true;
      if (drawn) io.stderr('\r\x1b[K');
    },
  };
}
