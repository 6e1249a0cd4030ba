import { calibrationProbes, computeLevels, type Levels } from '../audit/calibrate.js';
import { detectAnswerType } from '../audit/answer-values.js';
import { planGold, type GoldPlan } from '../audit/plan-audit.js';
import type { EvalRequest, EvalResult } from '../calls.js';
import type { AnswerType } from '../types.js';

/**
 * Each gold a file holds, planned and calibrated once: its seeded wrong
 * values and fresh alternate (as the gate plans a row), and the honest and
 * wrong levels its rollouts' rewards are judged by. Real files repeat their
 * golds (several rollouts per prompt, many prompts per answer), so the cost
 * of calibration is paid per gold, not per rollout. The book is bounded: the
 * golds least recently used are forgotten, and planned again if they return.
 */

/** Golds kept at once. */
const MAX_GOLDS = 4096;

export interface GoldEntry {
  plan: GoldPlan;
  levels: Promise<Levels>;
}

export interface GoldBookOptions {
  answerType: AnswerType | 'auto';
  choices: readonly string[];
  /** Labels given by the user: a letter outside them is no choice. */
  choicesGiven: boolean;
  seed: number;
  /** Scores the calibration probes: the scan's verifier calls. */
  evaluate: (requests: EvalRequest[]) => Promise<EvalResult[]>;
}

export class GoldBook {
  private readonly entries = new Map<string, GoldEntry>();
  /** Golds calibrated, repeats after being forgotten included. */
  calibrated = 0;

  constructor(private readonly options: GoldBookOptions) {}

  typeOf(gold: string): AnswerType {
    if (this.options.answerType !== 'auto') return this.options.answerType;
    return detectAnswerType(gold, this.options.choicesGiven ? this.options.choices : undefined);
  }

  /**
   * The gold's plan and levels. A gold seen first is calibrated on the
   * prompt and info of the rollout it came with: a verifier that reads the
   * row (an environment's own path, a list of aliases) is calibrated on one.
   */
  get(gold: string, context: { prompt: string | null; info: Record<string, unknown> }): GoldEntry {
    const known = this.entries.get(gold);
    if (known) {
      // Most recently used last: the first key is the one to forget.
      this.entries.delete(gold);
      this.entries.set(gold, known);
      return known;
    }
    const type = this.typeOf(gold);
    // One plan per gold whatever row it came from: row 0 seeds it, so the same gold always gets the same alternates.
    const plan = planGold({ index: 0, answer: gold, prompt: null, info: {} }, type, this.options.choices, this.options.seed);
    const probes = calibrationProbes(gold, plan.context.wrong[0]!);
    const levels = this.options
      .evaluate(probes.map((probe) => ({ completion: probe.completion, answer: gold, prompt: context.prompt, info: context.info })))
      .then((results) => computeLevels(probes, results));
    levels.catch(() => undefined);
    const entry = { plan, levels };
    this.calibrated += 1;
    this.entries.set(gold, entry);
    if (this.entries.size > MAX_GOLDS) this.entries.delete(this.entries.keys().next().value!);
    return entry;
  }
}
