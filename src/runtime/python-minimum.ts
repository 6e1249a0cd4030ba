/**
 * The oldest Pythons gatekept runs on, each stated once: every check and
 * every message that names a version reads it here (python/harness.py and
 * python/smoke.py repeat them, and a test keeps them in step).
 */

/** The harness: gate, pack and scan --reward run the verifier in it; an OpenEnv package is served with it. */
export const MIN_PYTHON = [3, 10] as const;

/** The verifiers library's own Requires-Python: audit --env, scan --env and smoke --verifiers load it. */
export const MIN_PYTHON_VERIFIERS = [3, 11] as const;

export type PythonVersion = readonly [number, number];

/** `[3, 10]` -> `3.10`. */
export function versionText(version: PythonVersion): string {
  return version.join('.');
}

/** Whether `major.minor` is older than `minimum`. */
export function olderThan(major: number, minor: number, minimum: PythonVersion): boolean {
  return major < minimum[0] || (major === minimum[0] && minor < minimum[1]);
}
