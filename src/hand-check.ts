/**
 * The pieces every hand check is made of. Input that gatekept reads on a
 * run's way (the corpus, a policy, dataset rows, options, a worker's ready
 * reply) is checked by hand first, and only input a check refuses goes
 * through its zod schema, which says what is wrong: building a schema costs
 * more than the run's other work before its first worker starts. A check
 * may refuse more than its schema (the schema then decides), never less.
 */

/** An object as JSON or TOML gives one: not null, not an array, nothing but a plain prototype. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

export function hasOnlyKeys(value: Record<string, unknown>, keys: ReadonlySet<string> | readonly string[]): boolean {
  const known = (key: string): boolean => (Array.isArray(keys) ? keys.includes(key) : (keys as ReadonlySet<string>).has(key));
  return Object.keys(value).every(known);
}

export const isText = (value: unknown): value is string => typeof value === 'string';

/** A string with at least one character. */
export const isName = (value: unknown): value is string => typeof value === 'string' && value.length > 0;

export const isOptionalText = (value: unknown): value is string | undefined => value === undefined || isText(value);

export function isOptional(value: unknown, check: (value: unknown) => boolean): boolean {
  return value === undefined || check(value);
}
