/**
 * Two ways to drive the command line from a test.
 *
 * `cli` runs it end to end, as a user does: `node bin/gatekept.js ARGS` in a
 * process of its own, with the bundled CLI, its signal handlers and its exit
 * code. That costs a Node start-up per call; keep it for what only a real
 * process shows (exit codes set by bin/, signals, the environment, the
 * working directory, output streams).
 *
 * `cliInProcess` calls the same entry bin/ calls, `run(argv, io)` from
 * src/cli/run.ts, inside the test process, and captures what it writes.
 * Argument and input checks, which fail before any audit starts, need no
 * more than that.
 */
import path from 'node:path';
import { execa } from 'execa';
import { run } from '../../src/cli/run.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

export const BIN = path.join(PACKAGE_ROOT, 'bin', 'gatekept.js');

export interface CliOptions {
  /** Working directory; the package root unless given. */
  cwd?: string;
  /** Added to (and overriding) the inherited environment; FORCE_COLOR=0 unless given. */
  env?: Record<string, string>;
  /** Kill the process after this many milliseconds. */
  timeout?: number;
}

/** `gatekept ARGS` in a process of its own; never rejects, whatever the exit code. */
export function cli(args: readonly string[], options: CliOptions = {}) {
  return execa(process.execPath, [BIN, ...args], {
    cwd: options.cwd ?? PACKAGE_ROOT,
    reject: false,
    stdin: 'ignore',
    env: { FORCE_COLOR: '0', ...options.env },
    ...(options.timeout !== undefined ? { timeout: options.timeout } : {}),
  });
}

export interface InProcessResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/**
 * `gatekept ARGS` through `run(argv, io)` in this process, in its working
 * directory (the package root under vitest). Shaped like `cli`'s result, so
 * a check reads the same either way.
 */
export async function cliInProcess(args: readonly string[]): Promise<InProcessResult> {
  let stdout = '';
  let stderr = '';
  const exitCode = await run(args, {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    stderrIsTty: false,
  });
  // As execa gives a process's output: without its final newline.
  const trim = (text: string) => (text.endsWith('\n') ? text.slice(0, -1) : text);
  return { exitCode, stdout: trim(stdout), stderr: trim(stderr) };
}
