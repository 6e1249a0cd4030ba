import { Command, Option } from 'commander';
import * as z from 'zod';
import type { Io } from './io.js';
import { GatekeptError, type ExitCode } from '../errors.js';
import { DEFAULT_POLICY, describeIssues, loadPolicy } from '../audit/policy.js';
import { createProgress } from './progress.js';
import { choiceLabels, integer } from './option-schemas.js';
import { reportFormatFor, writeReport } from '../report/render-report.js';
import { resolvePython } from '../runtime/resolve-python.js';
import { openSandbox, SANDBOX_MODES } from '../runtime/sandbox.js';
import { ANSWER_FORMATS, ANSWER_TYPES } from '../types.js';

/** `gatekept audit --env`: options in, the environment scorecard (or its record) and an exit code out. */

const auditOptionsSchema = z.object({
  env: z.string().min(1, 'give an environment: a package directory or an installed module name'),
  python: z.string().optional(),
  pythonpath: z.array(z.string()).default([]),
  rows: integer('--rows')
    .refine((value) => value >= 1 && value <= 100_000, '--rows must be between 1 and 100000')
    .optional(),
  against: z.array(z.string()).default([]),
  results: z.string().optional(),
  answerType: z.enum([...ANSWER_TYPES, 'auto']).default('auto'),
  choices: choiceLabels().optional(),
  format: z.enum([...ANSWER_FORMATS, 'auto']).default('auto'),
  policy: z.string().optional(),
  seed: integer('--seed').optional(),
  json: z.boolean().default(false),
  sandbox: z.enum(SANDBOX_MODES).default('auto'),
  report: z.string().min(1, 'give a report file ending in .html or .md').optional(),
  workers: integer('--workers')
    .refine((value) => value >= 1 && value <= 256, '--workers must be between 1 and 256')
    .optional(),
});

const FLAGS: Record<string, string> = {
  env: '--env',
  python: '--python',
  rows: '--rows',
  against: '--against',
  results: '--results',
  answerType: '--answer-type',
  choices: '--choices',
  format: '--format',
  policy: '--policy',
  seed: '--seed',
  workers: '--workers',
  report: '--report',
};

const collect = (value: string, previous: string[]): string[] => [...previous, value];

export function auditCommand(io: Io, setExit: (code: ExitCode) => void): Command {
  return new Command('audit')
    .description('audit an existing environment (verifiers 0.4 Taskset or classic 0.3) before pushing or training')
    .requiredOption('--env <id-or-dir>', 'the environment: a package directory, an installed module name or a hub id owner/name@version')
    .option('--python <path>', 'Python interpreter or virtualenv directory with the environment\'s library (default: $GATEKEPT_PYTHON or python3)')
    .option('--pythonpath <dir>', 'extra directory on the environment\'s import path (repeatable)', collect, [])
    .option('--rows <n>', 'dataset rows gated (default: the policy\'s budget.rows)')
    .option('--against <file>', 'JSONL questions to check the prompts against for contamination (repeatable)', collect, [])
    .option('--results <file>', 'a vf-eval results JSONL (0.3 results.jsonl or 0.4 traces.jsonl) for the reward distribution')
    .addOption(new Option('--answer-type <type>', 'answer type (default: inferred from the rows)').choices([...ANSWER_TYPES, 'auto']).default('auto'))
    .option('--choices <labels>', 'comma-separated labels for multiple choice (default A,B,C,D)')
    .addOption(new Option('--format <format>', 'the answer format to attack in (default: every format the reward accepts)').choices([...ANSWER_FORMATS, 'auto']).default('auto'))
    .option('--policy <file>', 'policy TOML (default: the shipped policy.toml)')
    .option('--seed <n>', 'seed (overrides the policy)')
    .option('--json', 'print the environment audit record as JSON')
    .option('--report <file>', 'also write a report, on PASS and on REJECT: .html (self-contained page) or .md (Markdown)')
    .option('--workers <n>', 'Python worker processes (default: number of cores)')
    .addOption(new Option('--sandbox <mode>', 'isolation of the reward functions: auto (bubblewrap when available, else a warning), bwrap (required), none').choices([...SANDBOX_MODES]).default('auto'))
    .action(async (raw: Record<string, unknown>) => {
      const parsed = auditOptionsSchema.safeParse(raw);
      if (!parsed.success) {
        throw new GatekeptError('BAD_ARGUMENT', 'invalid options', {
          details: describeIssues(parsed.error).map((line) => line.replace(/^(\w+)/, (key) => FLAGS[key] ?? key)),
          suggestion: 'see `gatekept audit --help`',
        });
      }
      const options = parsed.data;
      // A report name with no known format fails now, not after the audit.
      if (options.report !== undefined) reportFormatFor(options.report);
      const policy = options.policy ? await loadPolicy(options.policy) : DEFAULT_POLICY;
      const sandbox = await openSandbox(options.sandbox);
      if (sandbox.warning) io.stderr(`warning: ${sandbox.warning}\n`);
      const progress = options.json ? undefined : createProgress(io, 'auditing');
      try {
        // Loaded on demand, like pack and smoke.
        const { auditEnv } = await import('../env-audit/env-audit.js');
        const { formatEnvScorecard } = await import('../env-audit/scorecard.js');
        const result = await auditEnv({
          env: options.env,
          python: resolvePython(options.python),
          sandbox: options.sandbox,
          pythonpath: options.pythonpath,
          ...(options.rows !== undefined ? { rows: options.rows } : {}),
          against: options.against,
          ...(options.results !== undefined ? { results: options.results } : {}),
          answerType: options.answerType,
          ...(options.choices ? { choices: options.choices } : {}),
          format: options.format,
          policy,
          ...(options.seed !== undefined ? { seed: options.seed } : {}),
          ...(options.workers !== undefined ? { workers: options.workers } : {}),
          ...(progress ? { onProgress: progress.update } : {}),
        });
        progress?.done();
        io.stdout(options.json ? `${JSON.stringify(result.record, null, 2)}\n` : `${formatEnvScorecard(result.record)}\n`);
        if (options.report !== undefined) {
          // The report names an environment of unknown kind (one that did not load) as such.
          const reportRecord = { ...result.record, env: { ...result.record.env, kind: result.record.env.kind ?? 'unknown' } };
          io.stderr(`report written to ${await writeReport(reportRecord, options.report)}\n`);
        }
        setExit(result.exitCode);
      } finally {
        progress?.done();
      }
    });
}
