import type { Levels } from '../audit/calibrate.js';
import type { Candidate } from '../audit/expand-candidates.js';
import { alternateGolds, unstatedAlternate } from '../audit/invariance.js';
import { screen, settle, statesSeveral, type AlternateOutcome, type Screen, type Verdict } from '../audit/judge.js';
import { alternateContextOf, type GoldPlan } from '../audit/plan-audit.js';
import type { EvalResult } from '../calls.js';
import { commitment } from '../audit/committed-answer.js';
import { SHAPE_SEVERITY, shapeOf, type Shape } from './shape.js';

/**
 * A real rollout judged the way the gate judges an attack: the completion
 * becomes a candidate (its shape standing for the attack family, its
 * commitment for the attack's declared intent), is screened on its reward
 * under its own gold, and, when rewarded, settled by the invariance test on
 * its rewards under alternate golds. Pure: the calls are the caller's.
 */

/**
 * `unrewarded`: the verifier does not pay it under its own gold; `error`:
 * the verifier raised, timed out or returned no number on it, or its gold
 * could not be calibrated.
 */
export const ROLLOUT_KINDS = ['exploit', 'false_accept', 'equivalent_form', 'honest', 'unrewarded', 'error'] as const;
export type RolloutKind = (typeof ROLLOUT_KINDS)[number];

export interface Judged {
  kind: RolloutKind;
  shape: Shape;
  /** The invariant that fired (exploits, errors), as the gate names it. */
  invariant: Verdict['invariant'];
  /** The golds it was rewarded under: its own first. */
  rewardedUnder: string[];
}

export interface ScanCandidate {
  candidate: Candidate;
  shape: Shape;
  /** It commits to the gold as a sound reader takes it. */
  honest: boolean;
}

/** The rollout as an attack candidate of the family its shape names. */
export function asCandidate(completion: string, plan: GoldPlan): ScanCandidate {
  const { gold, type, choices } = plan.context;
  const shape = shapeOf(completion, gold, type, choices);
  const committed = commitment(completion, gold, type, choices);
  const statesGold = foldedIncludes(completion, gold);
  return {
    shape,
    honest: committed.honest,
    candidate: {
      attackId: `scan/${shape}`,
      family: shape,
      severity: SHAPE_SEVERITY[shape],
      hackIf: 'rewarded',
      gFree: !statesGold,
      commitsTo: committed.commitsTo,
      format: committed.format,
      position: null,
      label: null,
      completion,
      // A model's reply has no template around its values: every word may be an answer.
      literal: '',
      answer: gold,
      row: plan.row.index,
    },
  };
}

function foldedIncludes(text: string, gold: string): boolean {
  return text.toLowerCase().includes(gold.trim().toLowerCase());
}

/** Partial payments are screened where a fresh gold gives them a baseline, as in the gate. */
function screensPartial(plan: GoldPlan): boolean {
  return (plan.alternate !== null || plan.freshTwin !== undefined) && (plan.context.type === 'numeric' || plan.context.type === 'string');
}

export interface FirstPass {
  screened: Screen;
  /** The alternate golds to score it under; empty when it needs none. */
  alternates: string[];
}

/** Screen a rollout on its reward under its own gold; the alternates the invariance test needs. */
export function firstPass(scan: ScanCandidate, result: EvalResult, levels: Levels, plan: GoldPlan): FirstPass {
  const [screened] = screen({ candidates: [scan.candidate], results: [result], levels: () => levels, partial: screensPartial(plan) });
  if (screened!.kind !== 'rewarded' && screened!.kind !== 'paid') return { screened: screened!, alternates: [] };
  return { screened: screened!, alternates: alternateGolds(scan.candidate.completion, alternateContextOf(plan), scan.candidate.format) };
}

/** The final kind of a rollout, from its first pass and, when it needed them, its rewards under the alternates. */
export function judgeRollout(
  scan: ScanCandidate,
  pass: FirstPass,
  result: EvalResult,
  levels: Levels,
  plan: GoldPlan,
  outcomes: readonly AlternateOutcome[],
): Judged {
  let verdict: Verdict;
  const { screened } = pass;
  if (screened.kind === 'rewarded' || screened.kind === 'paid') {
    const candidate = scan.candidate;
    const unstated =
      screensPartial(plan) && statesSeveral(candidate)
        ? unstatedAlternate(
            candidate.completion,
            outcomes.map(({ answer }) => answer),
            alternateContextOf(plan),
          )
        : null;
    verdict = settle(candidate, outcomes, levels, {
      screened: screened.kind === 'paid' ? screened : 'rewarded',
      partial: unstated !== null && result.reward !== null ? { reward: result.reward, unstated } : null,
    });
  } else {
    verdict = screened;
  }
  return { kind: kindOf(verdict, scan.honest), shape: scan.shape, invariant: verdict.invariant, rewardedUnder: verdict.rewardedUnder };
}

function kindOf(verdict: Verdict, honest: boolean): RolloutKind {
  switch (verdict.kind) {
    case 'exploit':
      return 'exploit';
    case 'false_accept':
    // Paid under another gold, but no policy gains much by it (a re-reading, a gain below the margin).
    case 'lenient':
      return 'false_accept';
    case 'equivalent_form':
      // Committed to the gold: as written, an honest answer; written another way, an equivalent form.
      return honest ? 'honest' : 'equivalent_form';
    case 'ok':
    case 'inapplicable':
      return 'unrewarded';
    case 'error':
    case 'unjudged':
      return 'error';
  }
}

/** A rollout whose gold could not be calibrated: nothing it earns can be judged. */
export function uncalibrated(scan: ScanCandidate): Judged {
  return { kind: 'error', shape: scan.shape, invariant: null, rewardedUnder: [] };
}
