/**
 * How people write numbers as answers, beyond the bare `-3.5`: thousands
 * grouped with commas, spaces or underscores (`1,000`, `1 000`, `1_000`), a
 * currency sign in front (`$1,000`, `-€5`), a percent sign behind (`10%`),
 * and scientific notation (`1e6`, bare only). A gold written so is a number,
 * and values derived from it (wrong values, near misses) are written in the
 * same spelling, so a hedge pairs `$1,000` with `$1,317`, not with `1317`.
 *
 * Not numbers: a decimal comma (`1,5`, which is a list to many readers),
 * groups not of three digits (`1,00`), fractions (`1/2`), units (`12 cm`)
 * and words. A percentage's value is the number written (`10%` is 10);
 * readers that take it as 0.1 are the invariance test's re-readings.
 */

export interface NumberSpelling {
  value: number;
  /** `-` or `+` as written, or ''. */
  sign: string;
  /** Whether the sign comes before the currency sign (`-$5`) or after it (`$-5`). */
  signFirst: boolean;
  /** A currency sign in front, or ''. */
  currency: string;
  /** What separates groups of three digits, or '' when the number is not grouped. */
  group: string;
  decimals: number;
  /** `%` (with the space before it when written with one), or ''. */
  percent: string;
  /** Written in scientific notation. */
  exponent: boolean;
}

const CURRENCY = '[$€£¥₹]';
const GROUPED = (sep: string): string => `\\d{1,3}(?:${sep}\\d{3})+`;
const SPELLING = new RegExp(
  `^([+-]?)(${CURRENCY}?)([+-]?)` +
    `(\\d+|${GROUPED(',')}|${GROUPED(' ')}|${GROUPED('\u00a0')}|${GROUPED('\u202f')}|${GROUPED('_')})?` +
    `(\\.\\d*)?([eE][+-]?\\d+)?( ?%)?$`,
  'u',
);

/** The spelling of a number as written, or undefined when the text is no number (see above). */
export function readNumber(text: string): NumberSpelling | undefined {
  const match = SPELLING.exec(text.trim());
  if (!match) return undefined;
  const [, before = '', currency = '', after = '', whole = '', fraction = '', exponent = '', percent = ''] = match;
  if (before !== '' && after !== '') return undefined;
  if (whole === '' && fraction.length < 2) return undefined;
  // Scientific notation is a bare number's: `$1e6` or `1e6%` is nobody's answer.
  if (exponent !== '' && (currency !== '' || percent !== '')) return undefined;
  const group = /\d(\D)\d{3}/u.exec(whole)?.[1] ?? '';
  const sign = before || after;
  const value = Number(`${sign === '-' ? '-' : ''}${whole.split(group || '\u0000').join('')}${fraction === '.' ? '' : fraction}${exponent}`);
  if (!Number.isFinite(value)) return undefined;
  return { value, sign, signFirst: before !== '', currency, group, decimals: Math.max(0, fraction.length - 1), percent, exponent: exponent !== '' };
}

/** A number's value in any spelling above; NaN when the text is none. */
export function numberValue(text: string): number {
  return readNumber(text)?.value ?? Number.NaN;
}

/** Whether the text is a number in a spelling beyond the bare one (grouped, currency, percent). */
export function isSpelled(spelling: NumberSpelling): boolean {
  return spelling.group !== '' || spelling.currency !== '' || spelling.percent !== '';
}

function grouped(digits: string, sep: string): string {
  if (sep === '') return digits;
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, sep);
}

/**
 * A value written the way `like` is: its currency sign, grouping, decimals
 * and percent sign. `text` is the value already written as a bare number
 * (a fixed-point one); a number in scientific notation stays as it is.
 */
export function writeLike(text: string, like: NumberSpelling): string {
  if (!isSpelled(like)) return text;
  const match = /^([+-]?)(\d+)(\.\d+)?$/.exec(text);
  if (!match) return text;
  const [, sign = '', digits = '', fraction = ''] = match;
  const body = `${grouped(digits, like.group)}${fraction}`;
  const signed = like.signFirst || like.currency === '' ? `${sign}${like.currency}${body}` : `${like.currency}${sign}${body}`;
  return `${signed}${like.percent}`;
}
