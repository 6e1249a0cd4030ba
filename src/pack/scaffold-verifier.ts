import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { choicesOf } from './build-dataset.js';
import { SLOT_READER_FILE_NAME, slotReaderSource } from './environment-spec.js';
import { GatekeptError } from '../errors.js';
import { readInputFile } from '../read-input.js';
import type { LoadedSeed } from './seed.js';
import { TEMPLATES_DIR } from '../paths.js';
import type { AnswerType, CompletionFormat } from '../types.js';

/**
 * The verifier an environment ships: a built-in hardened template configured
 * for the seed's answer format, or the seed's own file, copied byte for byte.
 */

export interface ScaffoldedVerifier {
  source: string;
  functionName: string;
  completionFormat: CompletionFormat;
  origin: 'builtin' | 'custom';
  /** Modules the verifier imports from its own directory (file name → source); see EnvironmentSpec.verifierModules. */
  modules: Readonly<Record<string, string>>;
}

/** Replace one `NAME = ...` configuration line, refusing templates that lack it. */
function setConstant(source: string, name: string, value: string, template: string): string {
  const line = new RegExp(`^${name} = .*$`, 'm');
  if (!line.test(source)) throw new GatekeptError('INTERNAL', `verifier template ${template} has no ${name} line`);
  return source.replace(line, () => `${name} = ${value}`);
}

/** `answerType`: what the golds are (see answerTypeOf); the built-in verifier is the one for that type. */
export async function scaffoldVerifier(loaded: LoadedSeed, answerType: AnswerType): Promise<ScaffoldedVerifier> {
  const { seed } = loaded;
  if (seed.verifier === 'builtin') {
    const template = `${answerType}.py`;
    let source = await readFile(path.join(TEMPLATES_DIR, 'verifiers', template), 'utf8');
    source = setConstant(source, 'ANSWER_FORMAT', JSON.stringify(seed.answer_format), template);
    if (seed.task === 'choice') source = setConstant(source, 'CHOICES', JSON.stringify(choicesOf(seed)), template);
    return {
      source,
      functionName: 'reward',
      completionFormat: 'messages',
      origin: 'builtin',
      modules: { [SLOT_READER_FILE_NAME]: slotReaderSource() },
    };
  }
  const file = path.resolve(loaded.baseDir, seed.verifier.file);
  const source = (
    await readInputFile(file, { what: 'verifier.file', shownAs: seed.verifier.file, suggestion: 'verifier.file is resolved relative to the seed file' })
  ).toString('utf8');
  return { source, functionName: seed.verifier.function, completionFormat: seed.verifier.completion_format, origin: 'custom', modules: {} };
}
