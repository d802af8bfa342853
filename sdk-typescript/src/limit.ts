/**
 * The adaptive in-flight limit (protocol.md §6.2): how many requests one client keeps outstanding.
 *
 * `AdaptiveLimit` is the pure core (no clock): a window that grows while answers come back without queueing
 * (slow start, then additive increase, as TCP's congestion window), shrinks when the round-trip time says
 * requests queue at the gateway (Vegas, as Netflix's concurrency-limits), and halves at once on a retryable
 * failure (429, 503, a timeout, ...). `Window` hands out places to the client's sends.
 */

export const INITIAL_LIMIT = 4; // the window a client starts with (or maxInFlight if smaller)
const QUEUE_GROW = 2; // below this many estimated queued requests a limited answer grows the window
const QUEUE_SHRINK = 4; // above this many the window shrinks by 1/limit per answer
const RTT_BUCKET_MS = 10_000; // the minimum round-trip time is kept over the last 10 to 20 s

/** What one request's answer means for the window. */
export type Signal = "success" | "failure" | "neutral";

/** The window's state and its rules; every method is a pure update. */
export class AdaptiveLimit {
  limit: number;
  ssthresh: number;
  generation = 0;
  private bucketMin = Infinity;
  private olderMin = Infinity;
  private bucketStart: number | undefined;
  private answered = true; // an answer came since the last decrease

  constructor(readonly ceiling: number) {
    this.limit = Math.min(INITIAL_LIMIT, ceiling);
    this.ssthresh = ceiling;
  }

  /** Requests that may be outstanding now. */
  get window(): number {
    return Math.max(1, Math.floor(this.limit));
  }

  /** The smallest round-trip time (ms) of the last 10 to 20 s (Infinity before the first). */
  get minRttMs(): number {
    return Math.min(this.bucketMin, this.olderMin);
  }

  /** The client moved to another endpoint: forget the minimum round-trip time (the new path has its own). */
  newPath(): void {
    this.bucketMin = Infinity;
    this.olderMin = Infinity;
    this.bucketStart = undefined;
  }

  /** A 200/422 after `rttMs`, answered at `nowMs`; `limited`: the request filled the window when it was sent. */
  succeeded(rttMs: number, limited: boolean, nowMs: number): void {
    this.answered = true;
    const rtt = Math.max(rttMs, 0.001);
    if (this.bucketStart === undefined || nowMs - this.bucketStart >= RTT_BUCKET_MS) {
      this.olderMin = this.bucketMin;
      this.bucketMin = Infinity;
      this.bucketStart = nowMs;
    }
    this.bucketMin = Math.min(this.bucketMin, rtt);
    const queue = this.limit * (1 - this.minRttMs / rtt);
    if (queue > QUEUE_SHRINK) {
      this.limit = Math.max(1, this.limit - 1 / this.limit);
      this.ssthresh = Math.min(this.ssthresh, this.limit);
    } else if (limited) {
      if (queue >= QUEUE_GROW) this.ssthresh = Math.min(this.ssthresh, this.limit);
      else if (this.limit < this.ssthresh) this.limit = Math.min(this.ceiling, this.limit + 1);
      else this.limit = Math.min(this.ceiling, this.limit + 1 / this.limit);
    }
  }

  /** A retryable failure of a request sent in `generation`: the window halves once per generation. */
  failed(generation: number): void {
    if (generation !== this.generation) return;
    this.generation += 1;
    this.limit = Math.max(1, this.limit / 2);
    if (this.answered) this.ssthresh = this.limit;
    this.answered = false;
  }
}

/** A place in the window held by one request. */
export interface Slot {
  readonly generation: number;
  readonly limited: boolean;
  readonly startedMs: number;
}

/** `AdaptiveLimit` shared by the sends of one client: `acquire` resolves when a place is free. */
export class Window {
  readonly limit: AdaptiveLimit;
  private outstanding = 0;
  private readonly waiting: Array<(slot: Slot | undefined) => void> = [];
  private stopped = false;
  /** The most requests ever outstanding at once (connections the transport needed). */
  peak = 0;

  constructor(ceiling: number, private readonly now: () => number = () => performance.now()) {
    this.limit = new AdaptiveLimit(ceiling);
  }

  /** A place in the window, when one is free; undefined once `stop()` was called. */
  acquire(): Promise<Slot | undefined> {
    if (this.stopped) return Promise.resolve(undefined);
    if (this.outstanding < this.limit.window && this.waiting.length === 0) return Promise.resolve(this.take());
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Give the place back with what the request's answer says about the gateway. */
  release(slot: Slot, signal: Signal): void {
    const now = this.now();
    this.outstanding -= 1;
    if (signal === "success") this.limit.succeeded(now - slot.startedMs, slot.limited, now);
    else if (signal === "failure") this.limit.failed(slot.generation);
    while (this.waiting.length > 0 && this.outstanding < this.limit.window) {
      (this.waiting.shift() as (slot: Slot | undefined) => void)(this.take());
    }
  }

  /** Resolve every waiter with undefined, for good (the client's hard stop). */
  stop(): void {
    this.stopped = true;
    for (const resolve of this.waiting.splice(0)) resolve(undefined);
  }

  private take(): Slot {
    this.outstanding += 1;
    this.peak = Math.max(this.peak, this.outstanding);
    return { generation: this.limit.generation, limited: this.outstanding >= this.limit.window, startedMs: this.now() };
  }
}
