import path from 'node:path';
import type { ExitCode } from '../errors.js';
import type { Severity } from '../types.js';

/** What `gatekept smoke` reports, and the report as text. */

export type SmokeTarget = 'openenv' | 'verifiers';

export interface SmokeCheck {
  name: string;
  ok: boolean;
  detail: string;
}

export interface SmokeEpisode {
  kind: 'honest' | 'attack';
  row: number;
  attack_id: string | null;
  severity: Severity | null;
  expected: number;
  observed: number | null;
  ok: boolean;
  /** Why the episode failed besides a different reward. */
  problems: string[];
}

/** Serialisable as is: `--json` prints it. */
export interface SmokeReport {
  target: SmokeTarget;
  env_id: string;
  package_dir: string;
  audit_file: string;
  python: string;
  passed: boolean;
  exit_code: ExitCode;
  checks: SmokeCheck[];
  episodes: SmokeEpisode[];
  /** Every process the run started (each led its own process group); all are gone when it returns. */
  pids: number[];
  /** The package's stderr tail, when something failed. */
  log: string[];
  duration_ms: number;
}

/** A value as a message quotes it: cut at 160 characters. */
export const brief = (value: unknown): string => {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 160 ? `${text.slice(0, 160)}…` : text;
};

const formatReward = (value: number | null): string => (value === null ? '-' : String(Number(value.toPrecision(10))));

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

export function formatSmokeReport(report: SmokeReport): string {
  const lines = [`smoke ${report.target} ${report.env_id}: ${report.episodes.length} episodes from ${path.basename(report.audit_file)}`];
  for (const check of report.checks) lines.push(`  ${check.ok ? 'ok  ' : 'FAIL'} ${pad(check.name, 9)} ${check.detail}`);
  lines.push('');
  const header = ['kind', 'row', 'attack', 'expected', 'observed', 'ok', 'attack severity'];
  const body = report.episodes.map((episode) => [
    episode.kind,
    String(episode.row),
    episode.attack_id ?? '-',
    formatReward(episode.expected),
    formatReward(episode.observed),
    episode.ok ? 'ok' : 'DIFF',
    episode.severity ?? '-',
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...body.map((row) => row[column]!.length)));
  lines.push(
    header
      .map((title, column) => pad(title, widths[column]!))
      .join('  ')
      .trimEnd(),
  );
  report.episodes.forEach((episode, index) => {
    lines.push(
      body[index]!.map((cell, column) => pad(cell, widths[column]!))
        .join('  ')
        .trimEnd(),
    );
    for (const problem of episode.problems) lines.push(`    ${problem}`);
  });
  if (report.episodes.some((episode) => episode.kind === 'attack')) {
    // A severe attack next to "ok" reads like a miss; it is a replay of what the gate already judged.
    lines.push(
      '',
      'attack episodes replay the most severe attacks the gate tried; ok means the package scored each exactly as the gate did.',
      "The severity is the attack's, not a finding: an attack the gate did not count as a hack is rewarded at most at the honest",
      'level (reward-overflow repeats the correct answer, so the honest reward is expected; only more would be a hack).',
    );
  }
  if (report.log.length > 0) {
    lines.push('', 'package stderr (tail):', ...report.log.map((line) => `  ${line}`));
  }
  const differing = report.episodes.filter((episode) => !episode.ok).length;
  const failedChecks = report.checks.filter((check) => !check.ok).length;
  lines.push('');
  if (report.passed) {
    lines.push(`smoke PASS: all ${report.episodes.length} episodes scored as audited (${(report.duration_ms / 1000).toFixed(1)}s)`);
  } else {
    const parts = [
      ...(differing > 0 ? [`${differing} of ${report.episodes.length} episodes differ from the audit`] : []),
      ...(failedChecks > 0 ? [`${failedChecks} check${failedChecks === 1 ? '' : 's'} failed`] : []),
    ];
    lines.push(`smoke FAIL: ${parts.join('; ')}`);
  }
  return lines.join('\n');
}
