/**
 * The send pump: up to `maxInFlight` deliveries at once (each request inside the adaptive in-flight window and
 * the client's gate, see sender.ts), each batch's outcome applied to the store.
 */

import type { Config } from "./config.js";
import { type DeliveryError, EventsDroppedError } from "./errors.js";
import type { Counters } from "./metrics.js";
import type { Action, Sender } from "./sender.js";
import type { Store } from "./store.js";
import type { Batch } from "./wire.js";

/** Takes ready batches from the store, delivers them, and acks, splits or releases them afterwards. */
export class Dispatcher {
  private inFlight = 0;
  private readonly sends = new Set<Promise<void>>();

  constructor(
    private readonly cfg: Config,
    private readonly store: Store,
    private readonly sender: Sender,
    private readonly durable: boolean,
    private readonly abort: AbortSignal,
    private readonly counters: Counters,
    private readonly fail: (error: DeliveryError) => void,
    /** Called after each send settled: the store may have room for queued batches. */
    private readonly afterSend: () => void,
  ) {}

  /** Start sends while fewer than `maxInFlight` are running and batches are ready. */
  pump(): void {
    if (this.abort.aborted) return;
    while (this.inFlight < this.cfg.maxInFlight) {
      const batch = this.store.take();
      if (batch === undefined) return;
      this.inFlight += 1;
      const send = this.sender.deliver(batch, this.durable).then(
        (action) => this.settle(batch, action),
        (err: unknown) => {
          process.emitWarning(`headwater: send failed unexpectedly: ${String(err)}`);
          this.settle(batch, { kind: "release" });
        },
      );
      this.sends.add(send);
      void send.finally(() => this.sends.delete(send));
    }
  }

  /** After the abort: wait (at most `boundMs`) until every send has settled. */
  async drain(boundMs: number): Promise<void> {
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.sends]), new Promise((r) => { bound = setTimeout(r, boundMs); })]);
    clearTimeout(bound);
  }

  private settle(batch: Batch, action: Action): void {
    this.inFlight -= 1;
    if (action.kind === "ack") {
      this.store.ack(batch);
    } else if (action.kind === "split") {
      this.store.replace(batch, action.parts);
    } else if (this.abort.aborted && !this.durable) {
      this.store.ack(batch);
      this.counters.settle(0, 0, { closed_unsent: batch.events.length });
      this.fail(new EventsDroppedError("closed_unsent", batch.events.length, "client closed during a retry"));
    } else {
      this.store.release(batch); // past its deadline with a spool: the gate paces the next attempt
    }
    this.afterSend();
  }
}
