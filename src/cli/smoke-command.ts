import { Command } from 'commander';
import * as z from 'zod';
import type { Io } from './io.js';
import type { ExitCode } from '../errors.js';
import { addShared, parseOptions, sharedSchema } from './options.js';
import { resolvePython } from '../runtime/resolve-python.js';
import { openSandbox } from '../runtime/sandbox.js';

/** `gatekept smoke`: options in, a report and an exit code out. */

/** What `smoke` takes from the shared option table (see options.ts). */
const SMOKE_SHARED = ['python', 'json', 'sandbox'] as const;

const smokeOptionsSchema = () =>
  z
    .object({
      openenv: z.string().min(1).optional(),
      verifiers: z.string().min(1).optional(),
      audit: z.string().min(1).optional(),
      timeoutS: z
        .string()
        .regex(/^\d+$/, 'must be a whole number of seconds')
        .transform(Number)
        .refine((value) => value >= 1 && value <= 86_400, 'must be between 1 and 86400')
        .default(120),
      ...sharedSchema(SMOKE_SHARED),
    })
    .refine((options) => (options.openenv === undefined) !== (options.verifiers === undefined), {
      message: 'give exactly one of --openenv DIR or --verifiers DIR',
      path: ['openenv'],
    });

export function smokeCommand(io: Io, setExit: (code: ExitCode) => void): Command {
  const command = new Command('smoke')
    .description('run an emitted package for real and check it scores the audited completions as the gate did')
    .option('--openenv <dir>', 'an emitted OpenEnv package: serve it on loopback and play episodes over /ws')
    .option(
      '--verifiers <dir>',
      'an emitted verifiers package: load its Taskset and score through Task.score (a classic package: load_environment() and its rubric)',
    )
    .option('--audit <file>', 'the audit to replay (default: gatekept_audit.json two levels above the package)');
  addShared(command, ['python'], {
    python: 'Python interpreter or virtualenv directory with openenv or verifiers (default: $GATEKEPT_PYTHON or python3)',
  }).option('--timeout-s <n>', 'wall-clock limit for the whole run, start-up included', '120');
  return addShared(command, ['json', 'sandbox'], {
    json: 'print the report as JSON',
    sandbox: 'isolation of the package: auto (bubblewrap when available, else a warning), bwrap (required), none',
  }).action(async (raw: Record<string, unknown>) => {
    const options = parseOptions(smokeOptionsSchema(), raw, 'smoke');
    const sandbox = await openSandbox(options.sandbox);
    if (sandbox.warning) io.stderr(`warning: ${sandbox.warning.replace('the verifier is', 'the package is')}\n`);
    // Loaded on demand, like pack: nothing else in the CLI needs it.
    const { formatSmokeReport, smoke } = await import('../smoke/smoke.js');
    const report = await smoke({
      target: options.openenv !== undefined ? 'openenv' : 'verifiers',
      dir: (options.openenv ?? options.verifiers)!,
      ...(options.audit !== undefined ? { audit: options.audit } : {}),
      python: resolvePython(options.python),
      timeoutS: options.timeoutS,
      sandbox: options.sandbox,
    });
    io.stdout(options.json ? `${JSON.stringify(report, null, 2)}\n` : `${formatSmokeReport(report)}\n`);
    setExit(report.exit_code);
  });
}
