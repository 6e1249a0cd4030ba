/**
 * Progress where people look: a terminal gets the redrawn line, a log (stderr
 * not a terminal) a plain line every ten seconds with the phase, the calls
 * done and the time left, and no control character.
 */
import { describe, expect, it, vi } from 'vitest';
import type { Io } from '../src/cli/io.js';
import { commandProgress, createProgress, logLine } from '../src/cli/progress.js';

function logIo(): { io: Io; lines: string[] } {
  const lines: string[] = [];
  return { io: { stdout: () => undefined, stderr: (text) => lines.push(text), stderrIsTty: false }, lines };
}

describe('progress in a log', () => {
  it('writes a plain line every interval: the phase, the calls done, the time left', async () => {
    const { io, lines } = logIo();
    const progress = createProgress(io, 'gating', 50)!;
    expect(progress).toBeDefined();
    progress.update(100, 400);
    await new Promise((resolve) => setTimeout(resolve, 130));
    progress.phase('loading the environment');
    await new Promise((resolve) => setTimeout(resolve, 70));
    progress.done();
    const count = lines.length;
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(lines.length).toBe(count);
    expect(lines.some((line) => /^gating: 100\/400 calls in \d+ s, about .* left\n$/.test(line))).toBe(true);
    expect(lines.some((line) => /^loading the environment: \d+ s\n$/.test(line))).toBe(true);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: what must not reach a log
    expect(lines.join('')).not.toMatch(/[\r\x1b]/);
  });

  it('says nothing new twice: no line for a phase begun a moment ago, one line for a phase whose calls are all done', () => {
    vi.useFakeTimers();
    try {
      const { io, lines } = logIo();
      const progress = createProgress(io, 'gating reward a', 10_000)!;
      progress.update(40, 40);
      vi.advanceTimersByTime(30_000);
      progress.update(40, 60);
      vi.advanceTimersByTime(10_000);
      // A tick 0.2 s into the next phase is skipped; the one after it is not.
      vi.advanceTimersByTime(9_800);
      progress.phase('gating reward b');
      vi.advanceTimersByTime(10_200);
      progress.done();
      expect(lines).toEqual(['gating reward a: 40/40 calls in 10 s\n', 'gating reward a: 40/60 calls in 40 s, about 20 s left\n', 'gating reward b: 10 s\n']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('says how long a phase with no counts has run, and the time left once calls are done', () => {
    expect(logLine('auditing', null, 0, 20_400)).toBe('auditing: 20 s');
    expect(logLine('auditing', 50, 100, 10_000)).toBe('auditing: 50/100 calls in 10 s, about 10 s left');
    expect(logLine('auditing', 100, 100, 10_000)).toBe('auditing: 100/100 calls in 10 s');
  });

  it('keeps its lines with --json, whose record goes to stdout, and shows no bar on a terminal then', () => {
    const { io } = logIo();
    const logged = commandProgress(io, 'gating', true);
    expect(logged).toBeDefined();
    logged!.done();
    expect(commandProgress({ ...io, stderrIsTty: true }, 'gating', true)).toBeUndefined();
  });
});
