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
      const perSecond = done / Math.max((now - started) / 1000, 1e-3);
      // Time left at the rate so far; padded, so a shorter estimate overwrites a longer one.
      const left = perSecond > 0 && total > done ? `, ${formatSeconds((total - done) / perSecond)} left` : '';
      io.stderr(`\r${label} [${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ${done}/${total} (${Math.round(perSecond)}/s${left})   `);
      drawn = true;
    },
    done() {
      if (finished) return;
      finished = true;
      if (drawn) io.stderr('\r\x1b[K');
    },
  };
}

/** `42s`, `3m05s`, `1h02m`: a time left, as precise as it is worth. */
export function formatSeconds(seconds: number): string {
  const whole = Math.ceil(seconds);
  if (whole < 60) return `${whole}s`;
  if (whole < 3600) return `${Math.floor(whole / 60)}m${String(whole % 60).padStart(2, '0')}s`;
  return `${Math.floor(whole / 3600)}h${String(Math.floor((whole % 3600) / 60)).padStart(2, '0')}m`;
}
