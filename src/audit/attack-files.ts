import { createHash } from 'node:crypto';
import path from 'node:path';
import { familyOf, validateFamily, type Attack, type Corpus } from './corpus.js';
import { templateProblem, usesGold } from './expand-candidates.js';
import { GatekeptError } from '../errors.js';
import { readInputFile } from '../read-input.js';

/**
 * Attack files of the user's own (`gate --attacks FILE`, repeatable): family
 * files in the corpus's format, such as the ones `scan --emit-attacks`
 * writes, kept next to an environment. They join the built-in corpus under
 * the same rules the corpus is linted by, so an attack from a file cannot
 * turn an honest answer into a finding: it declares what it commits to, and
 * the declaration must fit its template.
 */

/** What is wrong with one attack's declaration, or nothing. The rules the shipped corpus is tested by. */
export function attackProblems(attack: Attack): string[] {
  const problems: string[] = [];
  const problem = templateProblem(attack.template);
  if (problem !== undefined) problems.push(problem);
  const states = (name: string): boolean => new RegExp(`\\{(F:)?${name}[|}]`).test(attack.template);
  if (attack.gFree !== !usesGold(attack.template))
    problems.push('g_free must be true exactly when the template holds no gold ({G}, a slot, a dump or the options)');
  if (attack.gFree && attack.commitsTo === 'gold') problems.push('a payload without the gold cannot commit to it: commits_to must not be "gold"');
  if ((attack.positions || /\{(DUMP:\d+|LABELS)\}/.test(attack.template)) && attack.commitsTo !== 'several') {
    problems.push('positioned slots, dumps and label lists state several values: commits_to must be "several"');
  }
  if (attack.hackIf === 'above_honest' && attack.commitsTo !== 'gold')
    problems.push('hack_if "above_honest" is for payloads that commit to the gold: commits_to must be "gold"');
  if (attack.commitsTo === 'gold' && ['W', 'W2', 'W3', 'T', 'L', 'A'].some(states))
    problems.push('a re-spelling of the gold states no wrong value, twin, label or slot');
  if (states('G') && (states('W') || states('T')) && attack.commitsTo === 'gold')
    problems.push('the gold beside a wrong value is not a commitment to the gold alone');
  return problems;
}

/**
 * The built-in corpus with the families of `files` added after it. Each
 * family must be new (by name) and each attack id unique across the whole;
 * the corpus hash covers the added files, so a record names what attacked.
 */
export async function withAttackFiles(base: Corpus, files: readonly string[], cwd: string): Promise<Corpus> {
  if (files.length === 0) return base;
  const seen = new Set(base.families.flatMap((family) => family.attacks.map((attack) => attack.id)));
  const names = new Set(base.families.map((family) => family.family));
  const hash = createHash('sha256').update(`base ${base.hash}\n`);
  const families = [...base.families];
  for (const file of files) {
    const suggestion = 'give a family file in the corpus format (attacks/README.md), such as the one scan --emit-attacks writes';
    const text = (await readInputFile(path.resolve(cwd, file), { what: 'attack file', shownAs: file, suggestion })).toString('utf8');
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new GatekeptError('BAD_ARGUMENT', `attack file ${file} is not JSON: ${(error as Error).message}`, { suggestion });
    }
    const raw = validateFamily(value, file, 'BAD_ARGUMENT');
    if (names.has(raw.family)) {
      throw new GatekeptError('BAD_ARGUMENT', `attack file ${file}: family ${raw.family} is already in the corpus`, {
        suggestion: 'give the family a name of its own',
      });
    }
    names.add(raw.family);
    const family = familyOf(
      raw,
      seen,
      (id) =>
        new GatekeptError('BAD_ARGUMENT', `attack file ${file}: attack id ${id} is already in the corpus`, {
          suggestion: 'give every attack an id of its own',
        }),
    );
    const wrongFamily = family.attacks.find((attack) => !attack.id.startsWith(`${family.family}/`));
    if (wrongFamily)
      throw new GatekeptError('BAD_ARGUMENT', `attack file ${file}: id ${wrongFamily.id} does not start with its family ${family.family}/`, { suggestion });
    const details = family.attacks.flatMap((attack) => attackProblems(attack).map((problem) => `${attack.id}: ${problem}`));
    if (details.length > 0) throw new GatekeptError('BAD_ARGUMENT', `attack file ${file} breaks the corpus rules`, { details, suggestion });
    hash.update(`${path.basename(file)}\n${text}\n`);
    families.push(family);
  }
  return { version: `${base.version}+${files.length}`, hash: hash.digest('hex'), families };
}
