import path from 'node:path';

/**
 * The environment of every Python process gatekept starts: the gate's
 * workers, the loader that inspects an environment and the smoke test's
 * helpers. It is a whitelist, so no credential, token or proxy in the
 * caller's environment reaches the code those processes run; what a purpose
 * needs beyond it is passed by the caller, by name.
 */

export interface PythonEnvOptions {
  /** HOME and TMPDIR as the process sees them (in the sandbox, its own). */
  home: string;
  tmp: string;
  /** Directories for PYTHONPATH, in order; none leaves it unset. */
  pythonpath: readonly string[];
  /** What this process needs beyond the common set, e.g. OFFLINE_HUB. */
  extra?: Readonly<Record<string, string>>;
}

/**
 * For a process that loads an environment or a package: its datasets and
 * models come from local files, and nothing is fetched from a hub.
 */
export const OFFLINE_HUB: Readonly<Record<string, string>> = {
  HF_DATASETS_OFFLINE: '1',
  HF_HUB_OFFLINE: '1',
  HF_DATASETS_DISABLE_PROGRESS_BARS: '1',
  TRANSFORMERS_OFFLINE: '1',
};

export function pythonEnv(options: PythonEnvOptions): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    HOME: options.home,
    TMPDIR: options.tmp,
    // The sandbox's user (its /etc/passwd names it); outside the sandbox, a
    // fixed name rather than the caller's.
    USER: 'user',
    ...(options.pythonpath.length > 0 ? { PYTHONPATH: options.pythonpath.join(path.delimiter) } : {}),
    // Hashing, and so set and dict order, is the same on every run.
    PYTHONHASHSEED: '0',
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONUNBUFFERED: '1',
    // Thread counts are pinned: threaded BLAS makes float sums vary run to
    // run and reserves address space per core, which trips RLIMIT_AS.
    OMP_NUM_THREADS: '1',
    OPENBLAS_NUM_THREADS: '1',
    MKL_NUM_THREADS: '1',
    // glibc reserves an arena of 64 MiB of address space for each thread
    // that allocates, up to 8 per core: a multiprocessing manager's threads in
    // a fork of a worker that imported datasets and pyarrow then run out of
    // limits.memory_mb's address space and cannot start a thread. Two arenas
    // are shared by every thread instead (memory use is the same).
    MALLOC_ARENA_MAX: '2',
    ...options.extra,
  };
}
