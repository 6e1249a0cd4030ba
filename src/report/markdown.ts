import { rankedAdvice } from './advice.js';
import { envVerdictWord, rewardOutcomeWord } from '../env-audit/record.js';
import { foldedText, showInline, showShort } from './show-text.js';
import {
  decisionSentence,
  falseAcceptFamilies,
  envDecisionSentence,
  evidenceText,
  familyRows,
  findingWhere,
  fixed,
  hackabilityText,
  stoppedText,
  honestView,
  refusedForms,
  type RefusedForms,
  invariantText,
  capitalise,
  envScoreText,
  isEnvAudit,
  plural,
  policyBounds,
  policyRows,
  provenanceRows,
  rewardedUnder,
  rewardText,
  timingText,
  worstByFamily,
  type ReportAudit,
  type ReportEnvAudit,
  type ReportFinding,
  type ReportRecord,
} from './report-view.js';

/**
 * The Markdown report: the HTML report's content without the chart, sized
 * for a pull-request comment. Long findings sit in collapsible details, so
 * the decision and the numbers stay on the first screen.
 */

/**
 * Completions are not wrapped: a wrapped line in a code block cannot be told
 * from a real line break, and the exact text is the point. Long ones are
 * shortened in the middle instead.
 */
const COMPLETION_CHARS = 800;

/** Text inside a table cell or running prose: hidden characters escaped, Markdown's own characters neutralised. */
function cell(text: string): string {
  return showInline(text)
    .replace(/\\/g, '\\\\')
    .replace(/\|/g, '\\|')
    .replace(/([*_`<>[\]])/g, '\\$1');
}

/** Inline code that survives any backticks inside it. */
function code(text: string): string {
  const shown = showInline(text);
  const longest = Math.max(0, ...(shown.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  const pad = shown.startsWith('`') || shown.endsWith('`') || shown.length === 0 ? ' ' : '';
  return `${fence}${pad}${shown.replace(/\|/g, '\\|')}${pad}${fence}`;
}

function block(text: string): string[] {
  const body = foldedText(text, { maxChars: COMPLETION_CHARS });
  const longest = Math.max(2, ...(body.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  return [`${fence}text`, body, fence];
}

function table(header: readonly string[], rows: readonly (readonly string[])[], numeric: ReadonlySet<number> = new Set()): string[] {
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map((_, index) => (numeric.has(index) ? '---:' : '---')).join('|')}|`,
    ...rows.map((row) => `| ${row.join(' | ')} |`),
  ];
}

function findingMd(finding: ReportFinding, kind: 'exploit' | 'false-accept' | 'lenient'): string[] {
  const golds = rewardedUnder(finding);
  const gain = finding.gain === undefined || finding.gain === null ? '' : ` · gain ${finding.gain}`;
  // A false accept is not an exploit: it carries no severity.
  const severity = kind === 'exploit' && finding.severity ? ` · ${escapeHtml(finding.severity)}` : '';
  const summary = `<code>${escapeHtml(finding.attack_id)}</code>${severity} · reward ${escapeHtml(rewardText(finding.reward, finding.non_finite))}${gain}`;
  const goldLine =
    kind !== 'false-accept'
      ? `Rewarded under ${golds.length === 1 ? 'the gold' : `${golds.length} golds`}: ${golds.map(code).join(', ')}`
      : `Gold: ${code(finding.answer)}`;
  return [
    '<details>',
    `<summary>${summary}</summary>`,
    '',
    `${cell(invariantText(finding.invariant))}; ${cell(findingWhere(finding))}.`,
    '',
    ...block(finding.completion),
    '',
    goldLine,
    '',
    '</details>',
    '',
  ];
}

function escapeHtml(text: string): string {
  return showInline(text).replace(/[&<>"]/g, (char) => `&#${char.codePointAt(0)};`);
}

function auditMd(record: ReportAudit, h: string): string[] {
  const bounds = policyBounds(record.policy);
  const rate = record.hack_rate;
  const view = honestView(record);
  const lines: string[] = [];

  // The exploits come first, right under the decision and its reasons: they are what the decision rests on.
  lines.push(`${h} Exploits: ${record.findings_total}`, '');
  const stopped = stoppedText(record);
  if (stopped !== null) lines.push(`**${stopped}**`, '');
  const groups = worstByFamily(record.findings);
  if (groups.length === 0) lines.push(stopped === null ? 'No attack was rewarded.' : 'No attack judged was rewarded.', '');
  else {
    lines.push(`The worst completions of each family, exactly as the verifier received them (invisible characters shown escaped).`, '');
    for (const group of groups) {
      lines.push(`**${cell(group.family)}** (${plural(group.total, 'finding')} recorded, ${group.findings[0]?.severity ?? 'no severity'})`, '');
      for (const finding of group.findings) lines.push(...findingMd(finding, 'exploit'));
    }
  }

  const numbers: string[][] = [
    ['hackability', hackabilityText(record), bounds.maxHackability === null ? '–' : `below ${fixed(bounds.maxHackability, 1)}`],
    [
      'hack rate',
      `${fixed(rate.point, 3)} [${fixed(rate.lo, 3)}, ${fixed(rate.hi, 3)}] over ${rate.n}`,
      bounds.maxHackRateCiHi === null ? '–' : `upper bound below ${bounds.maxHackRateCiHi}`,
    ],
    ['exploits', String(record.findings_total), 'gated'],
  ];
  if (record.false_accepts) {
    numbers.push([
      'false accepts',
      `${record.false_accepts.total} of ${record.false_accepts.attempts}`,
      bounds.strict ? 'gated (strict)' : 'reported, not gated',
    ]);
  }
  numbers.push(['honest forms refused', `${view.rejected.length} of ${view.total}`, 'reported, not gated']);
  lines.push(...table(['measure', 'value', 'policy'], numbers), '');
  const refused = refusedForms(record);
  const refusedLine = (group: RefusedForms) => `${group.title}: ${group.forms.map(({ form, completion }) => `${code(completion)} (${cell(form)})`).join(', ')}`;
  if (refused.honest) lines.push(`**${refusedLine(refused.honest)}** (correct answers; reported, not gated)`, '');
  if (refused.contested) lines.push(`${refusedLine(refused.contested)} (reasonable graders differ on these; not gated)`, '');

  const families = familyRows(record);
  if (families.length > 0) {
    lines.push(`${h} Attack families`, '');
    const hit = families.filter((family) => family.exploits > 0 || family.falseAccepts > 0);
    const quiet = families.length - hit.length;
    if (hit.length > 0) {
      // A record from before false accepts were measured gets no column of zeros.
      const measured = record.false_accepts !== undefined;
      lines.push(
        ...table(
          ['family', 'attempts', 'exploits', ...(measured ? ['false accepts'] : []), 'severity'],
          hit.map((family) => [
            code(family.family),
            String(family.attempts),
            String(family.exploits),
            ...(measured ? [String(family.falseAccepts)] : []),
            family.severity ?? '–',
          ]),
          new Set(measured ? [1, 2, 3] : [1, 2]),
        ),
        '',
      );
    }
    if (quiet > 0) {
      lines.push(
        `${hit.length > 0 ? `The other ${plural(quiet, 'family', 'families')}` : `All ${plural(quiet, 'family', 'families')}`} (${families
          .filter((family) => family.exploits === 0 && family.falseAccepts === 0)
          .reduce((sum, family) => sum + family.attempts, 0)} attempts) rewarded nothing${record.stopped ? ' before the audit stopped' : ''}.`,
        '',
      );
    }
  }

  const lenient = record.leniencies;
  if (lenient && lenient.total > 0) {
    lines.push(`${h} Leniencies: ${lenient.total}`, '');
    lines.push(
      `Paid under more than one gold with little for a policy to gain (one quantity read two ways, or a gain below min_gain ${fixed(Number(record.policy.min_gain ?? 0.05), 2)}); ${bounds.strict ? 'gated on: the policy is strict' : 'reported, not gated on'}.`,
      '',
    );
    for (const group of worstByFamily(lenient.examples)) {
      lines.push(`**${cell(group.family)}**`, '');
      for (const finding of group.findings) lines.push(...findingMd(finding, 'lenient'));
    }
  }

  const falseAccepts = record.false_accepts;
  if (falseAccepts) {
    lines.push(`${h} False accepts: ${falseAccepts.total}`, '');
    lines.push(
      `Wrong answers rewarded as right: ${falseAccepts.total} of ${falseAccepts.attempts} attempts (rate ${fixed(falseAccepts.rate, 3)}); ${bounds.strict ? 'gated on: the policy is strict' : 'reported, not gated on'}.`,
      '',
    );
    for (const family of falseAcceptFamilies(falseAccepts)) {
      lines.push(`**${cell(family.family)}**: ${plural(family.count, 'false accept')}`, '');
      for (const finding of family.examples) lines.push(...findingMd(finding, 'false-accept'));
    }
  }

  lines.push(`${h} Honest forms (false rejections): ${view.rejected.length}`, '');
  lines.push(
    view.total === 0 && record.stopped
      ? 'No honest way of writing the gold was tried: the audit stopped first.'
      : `${view.rewarded} of ${view.total} honest ways of writing the gold were rewarded. Reported, never gated on.`,
    '',
  );
  const variantRows = [...view.rejected, ...view.contested].map((variant) => [
    cell(variant.form),
    variant.contested ? 'contested' : 'honest',
    code(showShort(variant.completion, 60)),
    rewardText(variant.reward),
  ]);
  if (variantRows.length > 0) lines.push(...table(['form', 'kind', 'completion', 'reward'], variantRows, new Set([3])), '');
  if (record.equivalent_forms) {
    lines.push(`Equivalent forms (the gold written another way, rewarded correctly, not exploits): ${record.equivalent_forms.total}.`, '');
    const rows = record.equivalent_forms.examples.map((finding) => [
      code(finding.attack_id),
      code(finding.completion),
      rewardText(finding.reward, finding.non_finite),
    ]);
    if (rows.length > 0) lines.push(...table(['attack', 'completion', 'reward'], rows, new Set([2])), '');
  }

  if (record.errors.length > 0 || record.side_effects.length > 0) {
    lines.push(`${h} Errors and side effects`, '');
    for (const error of record.errors)
      lines.push(
        `- ${code(error.invariant)} × ${error.count}: ${cell(invariantText(error.invariant))}${error.examples[0] ? ` (e.g. ${code(error.examples[0].error)})` : ''}`,
      );
    for (const effect of record.side_effects)
      lines.push(`- ${code(effect.kind)} × ${effect.count}${effect.examples[0] ? `: ${code(effect.examples[0])}` : ''}`);
    lines.push('');
  }

  const advice = rankedAdvice(record);
  if (advice.length > 0) {
    lines.push(`${h} Hardening`, '', 'Most costly first; each line names the findings that call for it.', '');
    for (const item of advice) lines.push(`1. ${code(item.label)} (${cell(item.fired)}): ${cell(item.advice)}`);
    lines.push('');
  }

  lines.push('<details>', '<summary>Provenance and policy</summary>', '');
  lines.push(
    ...table(
      ['field', 'value'],
      [...provenanceRows(record), ...policyRows(record.policy).map(([key, value]): [string, string] => [`policy ${key}`, value])].map(([key, value]) => [
        key,
        code(value),
      ]),
    ),
    '',
  );
  const timing = timingText(record);
  if (timing) lines.push(`Audit time ${timing} (the one part of a record that changes between runs).`, '');
  lines.push('</details>', '');
  return lines;
}

function reasonsMd(record: ReportAudit): string[] {
  return record.reasons.length > 1 ? [...record.reasons.map((reason) => `- ${code(reason.code)} ${cell(reason.message)}`), ''] : [];
}

function decisionMark(decision: 'PASS' | 'REJECT' | 'UNDECIDED'): string {
  return decision === 'PASS' ? '✅ PASS' : decision === 'REJECT' ? '❌ REJECT' : '⚠️ COULD NOT DECIDE';
}

/** An environment's verdict as its exit code says it: none for bad input, COULD NOT DECIDE for 3. */
function envMark(record: ReportEnvAudit): string {
  const word = envVerdictWord(record);
  return word === 'PASS' ? '✅ PASS' : word === 'REJECT' ? '❌ REJECT' : word === null ? '⚠️ no verdict (bad input)' : `⚠️ ${word}`;
}

function auditPage(record: ReportAudit): string[] {
  return [
    `## gatekept ${decisionMark(record.decision)}: ${code(record.verifier.spec)}${record.package ? ` (environment ${code(record.package.env_id)})` : ''}`,
    '',
    `**${cell(decisionSentence(record))}**`,
    '',
    ...reasonsMd(record),
    ...auditMd(record, '###'),
    `> ${cell(record.statement)}`,
  ];
}

function envPage(record: ReportEnvAudit): string[] {
  const env = record.env;
  const lines = [
    `## gatekept ${envMark(record)}: environment ${code(env.id)}${env.kind === null ? '' : ` (${env.kind})`}`,
    '',
    `**${cell(envDecisionSentence(record))}**`,
    '',
    `${capitalise(envScoreText(record))}; ${env.rows_audited} of ${env.rows_total} rows audited${env.rows_cap ? ` (${cell(env.rows_cap.note)})` : ''}.`,
    '',
    ...table(
      ['check', 'status', 'score', 'justification'],
      record.checks.map((check) => [
        code(check.name),
        check.status === 'FAIL' ? '**FAIL**' : check.status,
        check.score === null ? '–' : `${fixed(check.score, 1)}/10`,
        cell(check.justification),
      ]),
      new Set([2]),
    ),
    '',
  ];
  const evidence = record.checks.flatMap((check) => {
    const text = evidenceText(check.evidence);
    return text ? [`- ${code(check.name)}: ${cell(text)}`] : [];
  });
  if (evidence.length > 0) lines.push('<details>', '<summary>Evidence</summary>', '', ...evidence, '', '</details>', '');
  if (record.total) {
    lines.push(
      `### Weighted total (the training signal): ${rewardOutcomeWord(record.total, envVerdictWord(record))}`,
      '',
      `${cell(decisionSentence(record.total))}`,
      '',
      ...reasonsMd(record.total),
      ...auditMd(record.total, '####'),
    );
  }
  for (const reward of record.rewards) {
    if (reward.audit === null) {
      lines.push(`### Reward ${code(reward.name)} (weight ${reward.weight ?? 'not known'}): not audited`, '', cell(reward.reason ?? ''), '');
      continue;
    }
    lines.push(
      `### Reward ${code(reward.name)} (weight ${reward.weight}): ${rewardOutcomeWord(reward.audit, envVerdictWord(record))}`,
      '',
      `${cell(decisionSentence(reward.audit))}`,
      '',
      ...reasonsMd(reward.audit),
      ...auditMd(reward.audit, '####'),
    );
  }
  lines.push(`Seed ${record.seed}; ${record.tool.name} ${record.tool.version}; record ${code(record.schema)}.`, '', `> ${cell(record.statement)}`);
  return lines;
}

export function renderMarkdown(record: ReportRecord): string {
  const lines = isEnvAudit(record) ? envPage(record) : auditPage(record);
  return `${lines.join('\n').replace(/\n{3,}/g, '\n\n')}\n`;
}
