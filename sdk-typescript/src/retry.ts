/**
 * The retry rule (protocol.md §4 and §6): classify a status (pure), and full-jitter backoff that is never
 * shorter than Retry-After.
 */

/** What an HTTP status means for a batch. */
export type Outcome = "done" | "split" | "retry" | "refused";

const RETRYABLE = new Set([408, 429, 500, 502, 503, 504]);

/** 200/422 done; 413 split; 408, 429, 500, 502, 503, 504 retry; every other status refused. */
export function classify(status: number): Outcome {
  if (status === 200 || status === 422) return "done";
  if (status === 413) return "split";
  if (RETRYABLE.has(status)) return "retry";
  return "refused";
}

/** A Retry-After is honoured up to this many times `retryMaxMs` (protocol.md §6). */
export const RETRY_AFTER_CAP_FACTOR = 10;

/** Milliseconds to wait before retry `attempt` (1-based): full jitter, never shorter than `retryAfterS`. */
export function backoffMs(attempt: number, baseMs: number, capMs: number, retryAfterS: number | undefined,
                          random: () => number = Math.random): number {
  let delay = random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt - 1, 52));
  if (retryAfterS !== undefined) delay = Math.max(delay, retryAfterS * 1000);
  return delay;
}
