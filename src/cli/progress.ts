import type { Io } from './io.js';

/**
 * A progress line on a terminal for audits longer than a second. When
 * stderr is not a terminal (a CI log, a file), a plain line every ten
 * seconds instead, so a long audit never looks like a hang there either,
 * and no control character reaches the log.
 *
 * An audit can run in phases (loading an environment, then one gate per
 * reward): each phase names itself, its bar starts from zero under that
 * name, and the time left is estimated from the phase's own rate. A phase
 * with no counts yet (loading) shows how long it has run, redrawn every
 * second, so a long load never looks like a hang.
 */

export interface Progress {
  update: (done: number, total: number) => void;
  /** Start a named phase. */
  phase: (label: string) => void;
  done: () => void;
}

const DELAY_MS = 1000;
const WIDTH = 30;
const TICK_MS = 1000;

/** `about 1 min 5 s left`, rounded so the line does not flicker. */
export function timeLeft(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '';
  if (seconds < 60) return `about ${Math.max(1, Math.round(seconds))} s left`;
  const minutes = Math.floor(seconds / 60);
  const rest = Math.round((seconds - minutes * 60) / 5) * 5;
  return `about ${minutes} min${rest > 0 && minutes < 10 ? ` ${rest} s` : ''} left`;
}

/** The line for `done` of `total` after `elapsedMs` of a phase: bar, counts, rate and time left. */
export function progressLine(label: string, done: number, total: number, elapsedMs: number): string {
  const fraction = total === 0 ? 1 : Math.min(1, done / total);
  const filled = Math.round(fraction * WIDTH);
  const seconds = Math.max(elapsedMs / 1000, 1e-3);
  const rate = done / seconds;
  // An estimate needs something done first; until then only the rate is honest.
  const left = done > 0 && done < total ? `, ${timeLeft((total - done) / rate)}` : '';
  return `${label} [${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ${done}/${total} (${Math.round(rate)}/s${left})`;
}

/** How often a log (stderr not a terminal) gets a line. */
export const LOG_EVERY_MS = 10_000;

/** The log's line: phase, calls done and time left, or how long a phase with no counts has run. */
export function logLine(label: string, done: number | null, total: number, elapsedMs: number): string {
  const seconds = Math.round(elapsedMs / 1000);
  if (done === null) return `${label}: ${seconds} s`;
  const rate = done / Math.max(elapsedMs / 1000, 1e-3);
  const left = done > 0 && done < total ? `, ${timeLeft((total - done) / rate)}` : '';
  return `${label}: ${done}/${total} calls in ${seconds} s${left}`;
}

function createLogProgress(io: Io, label: string, everyMs: number): Progress {
  let phaseLabel = label;
  let phaseStarted = Date.now();
  let counts: { done: number; total: number } | null = null;
  let finished = false;
  /** The phase whose calls were all done when its last line was written. */
  let toldComplete: string | null = null;
  const tick = setInterval(() => {
    if (finished) return;
    const elapsed = Date.now() - phaseStarted;
    // A phase begun a moment ago has nothing to say yet ("0 s"), and one whose
    // calls were all done when its last line went out says the same again.
    if (counts === null && elapsed < everyMs / 10) return;
    const complete = counts !== null && counts.done >= counts.total;
    if (complete && toldComplete === phaseLabel) return;
    toldComplete = complete ? phaseLabel : null;
    io.stderr(`${logLine(phaseLabel, counts?.done ?? null, counts?.total ?? 0, elapsed)}\n`);
  }, everyMs);
  tick.unref();
  return {
    update(done, total) {
      counts = { done, total };
    },
    phase(next) {
      phaseLabel = next;
      phaseStarted = Date.now();
      counts = null;
    },
    done() {
      finished = true;
      clearInterval(tick);
    },
  };
}

export function createProgress(io: Io, label: string, logEveryMs = LOG_EVERY_MS): Progress | undefined {
  if (!io.stderrIsTty) return createLogProgress(io, label, logEveryMs);
  const started = Date.now();
  let phaseLabel = label;
  let phaseStarted = started;
  let counted = false;
  let drawn = false;
  let finished = false;
  let last = 0;
  // Only the controls go out raw: the line itself holds names from outside (a reward's, in a phase label).
  const control = io.stderrControl ?? io.stderr;
  const draw = (line: string) => {
    control('\r\x1b[K');
    io.stderr(line);
    drawn = true;
  };
  const tick = setInterval(() => {
    if (finished || counted || Date.now() - started < DELAY_MS) return;
    draw(`${phaseLabel}… ${Math.round((Date.now() - phaseStarted) / 1000)} s`);
  }, TICK_MS);
  tick.unref();
  return {
    update(done, total) {
      const now = Date.now();
      counted = true;
      if (finished || now - started < DELAY_MS || (now - last < 100 && done < total)) return;
      last = now;
      draw(progressLine(phaseLabel, done, total, now - phaseStarted));
    },
    phase(next) {
      if (finished) return;
      phaseLabel = next;
      phaseStarted = Date.now();
      counted = false;
      if (Date.now() - started >= DELAY_MS) draw(`${phaseLabel}…`);
    },
    done() {
      if (finished) return;
      finished = true;
      clearInterval(tick);
      if (drawn) control('\r\x1b[K');
    },
  };
}

/**
 * A command's progress: none on a terminal with --json (the record is what
 * the user asked to see there), but a log still gets its plain lines, since
 * they go to stderr and a long --json audit in CI must not look like a hang.
 */
export function commandProgress(io: Io, label: string, json: boolean | undefined): Progress | undefined {
  return json && io.stderrIsTty ? undefined : createProgress(io, label);
}
