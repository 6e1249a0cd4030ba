/** Vocabulary shared by every stage of the pipeline. */

export const ANSWER_TYPES = ['numeric', 'string', 'choice', 'boolean'] as const;
export type AnswerType = (typeof ANSWER_TYPES)[number];

/**
 * The ways an answer can be written at the end of a completion:
 * bare `42`, `\boxed{42}`, `<answer>42</answer>`, a final `Answer: 42` line,
 * `#### 42`, or `{"answer": "42"}`.
 */
export const ANSWER_FORMATS = ['bare', 'boxed', 'xml', 'line', 'hash', 'json'] as const;
export type AnswerFormat = (typeof ANSWER_FORMATS)[number];

/** How the harness hands the completion to the verifier. */
export const COMPLETION_FORMATS = ['messages', 'string'] as const;
export type CompletionFormat = (typeof COMPLETION_FORMATS)[number];

export const SEVERITIES = ['low', 'medium', 'high', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];

export const SEVERITY_WEIGHT: Readonly<Record<Severity, number>> = {
  low: 0.25,
  medium: 0.5,
  high: 0.8,
  critical: 1.0,
};
