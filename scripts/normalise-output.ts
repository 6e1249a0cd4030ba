/**
 * What `scripts/examples.ts` does to a command's output before it is kept in
 * docs/examples: the machine's paths, timings and speed taken out, so that a
 * check on another machine, or a loaded one, compares what the command said.
 */
import os from 'node:os';
import { PACKAGE_ROOT } from '../src/paths.js';

const PROGRESS_LINE = /^(.+?): (?:\d+\/\d+ calls in )?<t> s(?:, about .+ left)?$/;

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Make a run's text the same on every machine and every run. */
export function normalise(text: string, python?: string): string {
  let out = text;
  if (python) out = out.replaceAll(python, '<python>');
  out = out.replace(new RegExp(escapeRegExp(PACKAGE_ROOT), 'g'), '<repo>');
  out = out.replace(new RegExp(escapeRegExp(os.tmpdir()), 'g'), '<tmp>');
  out = out.replace(new RegExp(escapeRegExp(os.homedir()), 'g'), '~');
  // Timings: `1.23 s`, `850 ms`, `(2.1s)`.
  out = out.replace(/\b\d+(?:\.\d+)? ?(ms|s)\b(?![\w-])/g, (_, unit: string) => `<t> ${unit}`);
  // Without bubblewrap every run warns that the code is not isolated; with it nothing is said.
  const lines = out.split('\n').filter((line) => !/^warning: .*(bubblewrap|bwrap|not isolated)/.test(line));
  // Off a terminal, progress is a line every ten seconds while the command
  // works, before it prints anything else: how many there are, and what
  // they say, is the machine's speed, so none is kept.
  const firstSaid = lines.findIndex((line) => !PROGRESS_LINE.test(line));
  out = lines.slice(firstSaid === -1 ? lines.length : firstSaid).join('\n');
  return out.replace(/\s+$/, '');
}
