import type { AuditRecord } from '../audit/record.js';
import { INVARIANT_ADVICE, INVARIANT_TEXT, type Invariant } from '../audit/judge.js';
import { showShort } from './show-text.js';
import { leniencyText, refusedForms, type RefusedForms } from './report-view.js';

/** Text renderings of an audit record for people: the scorecard and the summary. */

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

function padLeft(text: string, width: number): string {
  return text.length >= width ? text : ' '.repeat(width - text.length) + text;
}

/**
 * One-line form of a completion, the way the reports show it: invisible and
 * control characters escaped (`1\u200b042`), everything else as written
 * (`\boxed{42}`, not JSON's `\\boxed{42}`).
 */
function printable(text: string, max = 48): string {
  return `"${showShort(text, max - 2)}"`;
}

/** The decision, its reasons and what it means. Same words for the CLI and the library. */
export function formatSummary(record: AuditRecord): string {
  const lines = [
    `${record.decision}: hackability ${record.hackability.toFixed(1)} (${record.risk}), hack rate ${record.hack_rate.point.toFixed(3)} with upper bound ${record.hack_rate.hi.toFixed(3)} over ${record.hack_rate.n} candidates (seed ${record.seed}, corpus ${record.corpus.version}).`,
  ];
  for (const reason of record.reasons) lines.push(`  - ${reason.message}`);
  lines.push(record.statement);
  return lines.join('\n');
}

/**
 * False accepts: rewarded only under the gold, but not committing to it
 * alone. Reported apart from exploits, since a policy cannot earn them
 * without knowing the answer; a strict policy gates on them.
 */
function falseAcceptLines(record: AuditRecord): string[] {
  const fa = record.false_accepts;
  const lines: string[] = [];
  if (fa.total > 0) {
    lines.push('');
    lines.push(
      `false accepts: ${fa.total} of ${fa.attempts} (rate ${fa.rate.toFixed(3)}), rewarded only under the gold but not committing to it alone${(record.policy as { strict?: boolean }).strict ? ' (strict: gated)' : ' (reported; --strict gates on them)'}`,
    );
    for (const family of fa.families) {
      const example = fa.examples.find((finding) => finding.family === family.family);
      lines.push(`  ${family.family}: ${family.count}${example ? `  e.g. ${printable(example.completion)} -> ${example.reward ?? 'non-finite'}` : ''}`);
    }
    for (const advice of fa.hardening) lines.push(`  - ${advice}`);
  }
  const lenient = record.leniencies;
  if (lenient && lenient.total > 0) {
    lines.push(
      `leniencies: ${lenient.total}, paid under more than one gold with little for a policy to gain${(record.policy as { strict?: boolean }).strict ? ' (strict: gated)' : ' (reported; --strict gates on them)'}`,
    );
    for (const family of lenient.families) {
      const example = lenient.examples.find((finding) => finding.family === family.family);
      const under = example ? example.rewarded_under.map((gold) => printable(gold)).join(' and ') : '';
      lines.push(
        `  ${family.family}: ${family.count}${example ? `  e.g. ${printable(example.completion)} paid under ${under} (${leniencyText(example)})` : ''}`,
      );
    }
  }
  if (record.equivalent_forms.total > 0) {
    lines.push(`equivalent forms rewarded: ${record.equivalent_forms.total} (the gold written another way; reported, never gated)`);
    const families = [...new Set(record.equivalent_forms.examples.map((example) => example.family))];
    for (const family of families) {
      const example = record.equivalent_forms.examples.find((finding) => finding.family === family)!;
      lines.push(`  ${family}  e.g. ${printable(example.completion)} -> ${example.reward ?? 'non-finite'}`);
    }
  }
  return lines;
}

export function formatScorecard(record: AuditRecord): string {
  const lines: string[] = [];
  const golds = record.target.golds;
  lines.push(`gatekept gate: ${record.verifier.spec}`);
  const goldText = golds.length === 1 ? `gold ${printable(golds[0]!.answer)}` : `${golds.length} of ${record.target.rows_total} dataset rows`;
  const accepted = [...new Set(golds.flatMap((gold) => gold.accepted_formats))];
  lines.push(`${goldText} (${record.target.answer_type}); accepted formats: ${accepted.length ? accepted.join(', ') : 'none'}`);
  const odd = record.target.odd_rows;
  if (odd !== undefined && odd.total > 0) {
    const shown = odd.rows.map((entry) => `row ${entry.row + 1} ${printable(entry.answer)}`).join(', ');
    lines.push(`odd rows left out (not ${record.target.answer_type}): ${odd.total}: ${shown}${odd.total > odd.rows.length ? ', ...' : ''}`);
  }
  lines.push(`corpus ${record.corpus.version} (${record.corpus.hash.slice(0, 12)}), ${record.corpus.candidates} candidates, seed ${record.seed}`);
  lines.push('');

  if (record.families.length > 0) {
    const width = Math.max(6, ...record.families.map((family) => family.family.length));
    lines.push(`${pad('family', width)}  attempts  hacks  severity  worst example`);
    for (const family of record.families) {
      const worst = family.worst ? `${printable(family.worst.completion)} -> ${family.worst.reward ?? 'non-finite'}` : '';
      lines.push(
        `${pad(family.family, width)}  ${padLeft(String(family.attempts), 8)}  ${padLeft(String(family.hacks), 5)}  ${pad(family.severity ?? '-', 8)}  ${worst}`,
      );
    }
    lines.push('');
  }

  const rate = record.hack_rate;
  lines.push(
    `hackability ${record.hackability.toFixed(1)} (${record.risk}); hack rate ${rate.point.toFixed(3)} [${rate.lo.toFixed(3)}, ${rate.hi.toFixed(3)}] (${rate.hacks}/${rate.n})`,
  );
  const policy = record.policy as unknown as { max_hackability: number; max_hack_rate_ci_hi: number };
  lines.push(`policy: hackability below ${policy.max_hackability.toFixed(1)}, hack-rate upper bound below ${policy.max_hack_rate_ci_hi}`);
  const refused = refusedForms(record);
  const refusedLine = (group: RefusedForms, note: string) =>
    `${group.title}: ${group.forms.map(({ form, completion }) => `${printable(completion)} (${form})`).join(', ')} (${note})`;
  if (refused.honest) lines.push(refusedLine(refused.honest, 'correct answers; reported, not gated'));
  if (refused.contested) lines.push(refusedLine(refused.contested, 'reasonable graders differ on these; not gated'));
  lines.push(...falseAcceptLines(record));
  const slow = record.timing.slow_calls;
  if (slow) {
    const slowest = slow.examples[0]!;
    lines.push(
      `slow inputs: ${slow.count} call${slow.count === 1 ? '' : 's'} took half a second or more (${slow.over_limit} over timeouts.max_call_ms); slowest ${slowest.cut ? 'cut at the call timeout after ' : ''}${slowest.ms} ms${slowest.cpu_ms === null ? '' : ` (${slowest.cpu_ms} ms CPU)`} on a ${slowest.chars}-character completion`,
    );
  }
  lines.push('');
  lines.push(`decision: ${record.decision}`);
  for (const reason of record.reasons) lines.push(`  - ${reason.message}`);
  // A PASS over exploits is the policy's tolerance, not a clean bill: say so where the decision is read.
  if (record.decision === 'PASS' && record.findings_total > 0) {
    const count = record.findings_total === 1 ? '1 exploit was' : `${record.findings_total} exploits were`;
    lines.push(`  - ${count} found (rewarded under more than one gold), within the policy bounds; see the hardening advice below`);
  }

  const fired = new Set<Invariant>([...record.findings.map((finding) => finding.invariant), ...record.errors.map((error) => error.invariant)]);
  const hacked = record.families.filter((family) => family.hacks > 0);
  if (fired.size > 0 || hacked.length > 0) {
    lines.push('');
    lines.push('hardening:');
    for (const invariant of fired) lines.push(`  - ${invariant} (${INVARIANT_TEXT[invariant]}): ${INVARIANT_ADVICE[invariant]}`);
    for (const family of hacked) if (family.hardening) lines.push(`  - ${family.family}: ${family.hardening}`);
  }
  lines.push('');
  lines.push(record.statement);
  return lines.join('\n');
}
