import { makeRng, renderInFormat, wrongValues, type FormatName } from './answer-values.js';
import type { Evaluator } from './evaluator.js';
import type { EvalRequest } from '../calls.js';
import type { AnswerType } from '../types.js';

/**
 * Every dataset row's gold, written in the environment's own answer format,
 * must score above a wrong answer: an environment that punishes correct
 * answers teaches nothing, however hard it is to game. Runs on the gate's own
 * workers, so packing starts Python and imports the verifier once.
 */

export interface GoldCheckRequest {
  /** The layout the environment's prompts ask for: a built-in format, or a declared one. */
  format: FormatName;
  rows: readonly { answer: string; prompt?: string | null; info?: Record<string, unknown> }[];
}

export interface GoldCheckResult {
  format: FormatName;
  /** Rows (0-based) whose gold is not rewarded above a wrong answer. */
  unrewarded: number[];
  /** Per row: the gold written in the format, and the reward it got (null when the call failed). */
  golds: { reply: string; reward: number | null }[];
}

export async function checkGolds(
  check: GoldCheckRequest,
  evaluator: Evaluator,
  context: { seed: number; answerType: AnswerType; choices: readonly string[] },
): Promise<GoldCheckResult> {
  const requests: EvalRequest[] = check.rows.flatMap((row, index) => {
    const wrong = wrongValues(row.answer, context.answerType, 1, makeRng(context.seed, 'health', index), context.choices)[0] ?? '';
    const base = { answer: row.answer, prompt: row.prompt ?? '', info: row.info ?? {} };
    return [
      { ...base, completion: renderInFormat(check.format, row.answer) },
      { ...base, completion: renderInFormat(check.format, wrong) },
    ];
  });
  const results = await evaluator.evaluate(requests, { key: 'gold check', phase: 'gold_check' });
  const unrewarded: number[] = [];
  const golds: GoldCheckResult['golds'] = [];
  check.rows.forEach((_row, index) => {
    const gold = results[2 * index]!;
    const wrong = results[2 * index + 1]!;
    const rewarded = gold.status === 'ok' && wrong.status === 'ok' && gold.reward !== null && wrong.reward !== null && gold.reward > wrong.reward;
    if (!rewarded) unrewarded.push(index);
    golds.push({ reply: requests[2 * index]!.completion, reward: gold.status === 'ok' ? gold.reward : null });
  });
  return { format: check.format, unrewarded, golds };
}
