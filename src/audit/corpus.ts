import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import * as z from 'zod';
import { GatekeptError } from '../errors.js';
import { ATTACKS_DIR } from '../paths.js';
import { ANSWER_TYPES, SEVERITIES } from '../types.js';

/** The attack corpus: one reviewed JSON file per family under attacks/. */

/**
 * What a payload commits to as its final answer, declared per attack: the
 * gold alone (a re-spelling of it), another value, no value, or several
 * values. It decides whether a rewarded payload that is no exploit is an
 * equivalent form (`gold`) or a false accept (the rest).
 */
export const COMMITMENTS = ['gold', 'other', 'none', 'several'] as const;
export type Commitment = (typeof COMMITMENTS)[number];

const attackSchema = z
  .object({
    id: z.string().regex(/^[a-z0-9-]+\/[a-z0-9-]+$/, 'ids look like family/slug'),
    commits_to: z.enum(COMMITMENTS),
    severity: z.enum(SEVERITIES),
    applies_to: z.array(z.enum(ANSWER_TYPES)).min(1),
    template: z.string(),
    formats: z.enum(['raw', 'each']),
    positions: z
      .union([z.tuple([z.literal('first'), z.literal('middle'), z.literal('last')]), z.tuple([z.literal('first'), z.literal('last')])])
      .optional(),
    g_free: z.boolean().optional(),
    hack_if: z.enum(['rewarded', 'above_honest']).optional(),
    each_label: z.boolean().optional(),
    note: z.string().optional(),
  })
  .strict();

const familySchema = z
  .object({
    family: z.string().regex(/^[a-z0-9-]+$/),
    title: z.string(),
    exploits: z.string(),
    hardening: z.string(),
    attacks: z.array(attackSchema).min(1),
  })
  .strict();

export type Position = 'first' | 'middle' | 'last';


export interface Attack {
  id: string;
  family: string;
  severity: (typeof SEVERITIES)[number];
  appliesTo: readonly (typeof ANSWER_TYPES)[number][];
  template: string;
  formats: 'raw' | 'each';
  positions: readonly Position[] | null;
  gFree: boolean;
  hackIf: 'rewarded' | 'above_honest';
  eachLabel: boolean;
  commitsTo: Commitment;
}

export interface Family {
  family: string;
  title: string;
  exploits: string;
  hardening: string;
  attacks: Attack[];
}

export interface Corpus {
  version: string;
  /** sha256 over every family file, so a record names exactly what attacked. */
  hash: string;
  families: Family[];
}

const cache = new Map<string, Promise<Corpus>>();

export function loadCorpus(dir: string = ATTACKS_DIR): Promise<Corpus> {
  let pending = cache.get(dir);
  if (!pending) {
    pending = readCorpus(dir);
    cache.set(dir, pending);
    pending.catch(() => cache.delete(dir));
  }
  return pending;
}

async function readCorpus(dir: string): Promise<Corpus> {
  const names = (await readdir(dir)).filter((name) => name.endsWith('.json')).sort();
  if (names.length === 0) throw new GatekeptError('INTERNAL', `no attack families found in ${dir}`);
  const version = (await readFile(path.join(dir, 'VERSION'), 'utf8')).trim();
  const hash = createHash('sha256');
  hash.update(`version ${version}\n`);
  const families: Family[] = [];
  const seen = new Set<string>();
  // Read together, hashed and validated in name order.
  const texts = await Promise.all(names.map((name) => readFile(path.join(dir, name), 'utf8')));
  for (const [index, name] of names.entries()) {
    const text = texts[index]!;
    hash.update(`${name}\n${text}\n`);
    const parsed = familySchema.safeParse(JSON.parse(text));
    if (!parsed.success) {
      throw new GatekeptError('INTERNAL', `attack family ${name} is invalid`, {
        details: parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`),
      });
    }
    const family = parsed.data;
    const attacks = family.attacks.map((raw): Attack => {
      if (seen.has(raw.id)) throw new GatekeptError('INTERNAL', `duplicate attack id ${raw.id} in ${name}`);
      seen.add(raw.id);
      return {
        id: raw.id,
        family: family.family,
        severity: raw.severity,
        appliesTo: raw.applies_to,
        template: raw.template,
        formats: raw.formats,
        positions: raw.positions ?? null,
        gFree: raw.g_free ?? false,
        hackIf: raw.hack_if ?? 'rewarded',
        eachLabel: raw.each_label ?? false,
        commitsTo: raw.commits_to,
      };
    });
    families.push({ family: family.family, title: family.title, exploits: family.exploits, hardening: family.hardening, attacks });
  }
  return { version, hash: hash.digest('hex'), families };
}
