import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * Keep the heap of a long audit near what it keeps alive. Each row's
 * candidates is promoted to the old generation while it waits on Python, and
 * V8 lets that generation grow several times over before collecting, so the
 * peak memory of an audit would grow with its length even though its live
 * data does not. A full collection runs only when the heap has grown well
 * past its size after the previous one, so short audits never pay for it.
 */
let collect: (() => void) | null | undefined;
let ceiling = 0;

function collector(): (() => void) | null {
  if (collect === undefined) {
    try {
      v8.setFlagsFromString('--expose-gc');
      collect = vm.runInNewContext('gc') as () => void;
    } catch {
      collect = null;
    }
  }
  return collect;
}

/** The heap alone: cheaper than process.memoryUsage(), which also measures the resident set. */
const heapUsed = (): number => v8.getHeapStatistics().used_heap_size;

export function collectGarbageIfGrown(): void {
  const used = heapUsed();
  if (ceiling === 0) {
    ceiling = used * 1.5 + 16 * 1024 * 1024;
    return;
  }
  if (used < ceiling) return;
  const gc = collector();
  if (!gc) return;
  gc();
  ceiling = heapUsed() * 1.5 + 16 * 1024 * 1024;
}
