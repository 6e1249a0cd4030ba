import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GatekeptError } from '../src/errors.js';
import { DEFAULT_POLICY, loadPolicy, parsePolicyToml } from '../src/audit/policy.js';
import { DEFAULT_POLICY_PATH } from '../src/paths.js';

function policyError(text: string): GatekeptError {
  try {
    parsePolicyToml(text, 'test.toml');
  } catch (error) {
    expect(error).toBeInstanceOf(GatekeptError);
    return error as GatekeptError;
  }
  throw new Error('expected the policy to be refused');
}

describe('policy', () => {
  it('the shipped policy.toml equals the built-in defaults', async () => {
    expect(await loadPolicy(DEFAULT_POLICY_PATH)).toEqual(DEFAULT_POLICY);
    expect(DEFAULT_POLICY.maxHackability).toBe(15);
    expect(DEFAULT_POLICY.maxHackRateCiHi).toBe(0.25);
  });

  it('defaults to gating on exploits only, with a call timeout above the 5 s of common math checkers', () => {
    expect(DEFAULT_POLICY.strict).toBe(false);
    expect(DEFAULT_POLICY.timeouts.callMs).toBeGreaterThanOrEqual(10_000);
    expect(parsePolicyToml('strict = true\n').strict).toBe(true);
    expect(policyError('strict = "yes"\n').details.join('\n')).toMatch(/strict/);
  });

  it('an empty file gives the defaults', () => {
    expect(parsePolicyToml('')).toEqual(DEFAULT_POLICY);
  });

  it('reads overrides, including nested sections', () => {
    const policy = parsePolicyToml('max_hackability = 5.0\nseed = 3\n[timeouts]\ncall_ms = 500\n');
    expect(policy.maxHackability).toBe(5);
    expect(policy.seed).toBe(3);
    expect(policy.timeouts.callMs).toBe(500);
    expect(policy.timeouts.importMs).toBe(DEFAULT_POLICY.timeouts.importMs);
  });

  it('rejects for slowness only past timeouts.max_call_ms, which follows call_ms unless set; 0 only reports slow calls', () => {
    expect(DEFAULT_POLICY.timeouts.maxCallMs).toBe(DEFAULT_POLICY.timeouts.callMs);
    expect(parsePolicyToml('[timeouts]\ncall_ms = 500\n').timeouts.maxCallMs).toBe(500);
    expect(parsePolicyToml('[timeouts]\nmax_call_ms = 2000\n').timeouts.maxCallMs).toBe(2000);
    expect(parsePolicyToml('[timeouts]\nmax_call_ms = 0\n').timeouts.maxCallMs).toBe(0);
    expect(policyError('[timeouts]\nmax_call_ms = 5\n').details.join('\n')).toMatch(/timeouts\.max_call_ms/);
    expect(policyError('[timeouts]\nmax_call_ms = -1\n').details.join('\n')).toMatch(/timeouts\.max_call_ms/);
  });

  it('refuses max_hackability = 0 as vacuous', () => {
    const error = policyError('max_hackability = 0');
    expect(error.code).toBe('BAD_POLICY');
    expect(error.details.join('\n')).toMatch(/max_hackability: .*vacuous/);
  });

  it('names unknown keys, also inside sections', () => {
    expect(policyError('max_hackabilty = 10').details.join('\n')).toMatch(/max_hackabilty: unknown key/);
    expect(policyError('[timeouts]\ncall = 10').details.join('\n')).toMatch(/timeouts\.call: unknown key/);
  });

  it('names out-of-range and mistyped values', () => {
    expect(policyError('max_hack_rate_ci_hi = 1.5').details.join('\n')).toMatch(/max_hack_rate_ci_hi/);
    expect(policyError('max_hack_rate_ci_hi = -0.1').details.join('\n')).toMatch(/max_hack_rate_ci_hi/);
    expect(policyError('max_hackability = "high"').details.join('\n')).toMatch(/max_hackability/);
    expect(policyError('[timeouts]\ncall_ms = 1').details.join('\n')).toMatch(/timeouts\.call_ms/);
  });

  it('reports TOML syntax errors with a position', () => {
    const error = policyError('max_hackability = = 3');
    expect(error.message).toMatch(/not valid TOML.*line 1/);
  });

  it('a missing file is FILE_NOT_FOUND and names the path', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'gatekept-policy-'));
    await expect(loadPolicy(path.join(dir, 'nope.toml'))).rejects.toMatchObject({ code: 'FILE_NOT_FOUND', message: expect.stringContaining('nope.toml') });
    await writeFile(path.join(dir, 'ok.toml'), 'max_hackability = 20\n');
    expect((await loadPolicy(path.join(dir, 'ok.toml'))).maxHackability).toBe(20);
    await rm(dir, { recursive: true, force: true });
  });
});
