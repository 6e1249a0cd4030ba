/**
 * On a Ray cluster every call under one gold runs on one actor: the pool
 * gives each gold a slot (one per actor), and each slot's session keeps its
 * actor until that actor is lost (see RayPlacement). The ledger records
 * where each gold's calls ran, for the record's executor.
 */

/** The slot of a gold: FNV-1a of its text over the slots, the same for every call under it. */
export function slotOfGold(answer: string, slots: number): number {
  if (slots <= 1) return 0;
  let hash = 0x811c9dc5;
  for (let index = 0; index < answer.length; index += 1) {
    hash ^= answer.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % slots;
}

/** Where golds' calls ran: each actor's golds, and each lost actor's golds that went on elsewhere. */
export interface GoldPlacement {
  /** Golds whose calls ran on each actor (a gold that moved with a lost actor counts on both). */
  golds: { actor: string; golds: number }[];
  /** For each actor some golds left (only a lost one, when all is well): how many, and the actors they went to. */
  moved: { from: string; to: string[]; golds: number }[];
}

export class GoldLedger {
  /**
   * Per gold: the history of the placement of the one session that serves
   * it, and the stretch of it its calls ran in. Kept as a stretch, not in the
   * order batches came back: a batch handed out before a loss may come back
   * after one handed out since.
   */
  private readonly golds = new Map<string, { history: readonly string[]; first: number; last: number }>();

  /**
   * A batch of these golds ran on the session whose placement has this
   * history, which was `from` actors long when the batch was handed out: it
   * ran on the actor of then, or on those that came after it (a loss on the
   * way moved it), and is recorded on all of them.
   */
  ran(answers: Iterable<string>, history: readonly string[], from: number): void {
    const first = Math.max(0, from - 1);
    const last = history.length - 1;
    for (const answer of answers) {
      const known = this.golds.get(answer);
      if (known && known.history === history) {
        known.first = Math.min(known.first, first);
        known.last = Math.max(known.last, last);
      } else if (known) {
        // Served by another session too: never meant to happen; shown as a move from all it ran on.
        const actors = [...known.history.slice(known.first, known.last + 1)];
        for (const actor of history.slice(first, last + 1)) if (actors.at(-1) !== actor) actors.push(actor);
        this.golds.set(answer, { history: actors, first: 0, last: actors.length - 1 });
      } else this.golds.set(answer, { history, first, last });
    }
  }

  evidence(): GoldPlacement {
    const golds = new Map<string, number>();
    const moved = new Map<string, { to: Set<string>; golds: number }>();
    for (const { history, first, last } of this.golds.values()) {
      const list = history.slice(first, last + 1);
      for (const actor of new Set(list)) golds.set(actor, (golds.get(actor) ?? 0) + 1);
      for (let index = 0; index + 1 < list.length; index += 1) {
        const from = list[index]!;
        const entry = moved.get(from) ?? { to: new Set<string>(), golds: 0 };
        entry.to.add(list[index + 1]!);
        entry.golds += 1;
        moved.set(from, entry);
      }
    }
    return {
      golds: [...golds].map(([actor, count]) => ({ actor, golds: count })).sort((a, b) => a.actor.localeCompare(b.actor)),
      moved: [...moved].map(([from, entry]) => ({ from, to: [...entry.to].sort(), golds: entry.golds })).sort((a, b) => a.from.localeCompare(b.from)),
    };
  }
}
