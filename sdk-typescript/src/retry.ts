/**
 * The retry rule (DECISIONS 1, protocol.md section 6): classify a status (pure), full-jitter backoff that is
 * never shorter than Retry-After, and an abortable, unref'd sleep.
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

/** Milliseconds to wait before retry `attempt` (1-based): full jitter, at least `retryAfterS` (capped at 10x cap). */
export function backoffMs(attempt: number, baseMs: number, capMs: number, retryAfterS: number | undefined,
                          random: () => number = Math.random): number {
  let delay = random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt - 1, 52));
  if (retryAfterS !== undefined) delay = Math.max(delay, Math.min(retryAfterS * 1000, capMs * 10));
  return delay;
}

/** Resolve after `ms` (true), or at once when `signal` aborts (false); the timer never keeps the process alive. */
export function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    timer.unref();
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
