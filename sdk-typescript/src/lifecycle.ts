/**
 * Process-wide exit hooks: on `beforeExit`, SIGTERM and SIGINT every open client is closed, each bounded by
 * its own `exitTimeoutMs`. Hooks are installed while at least one such client is open, and a signal is raised
 * again after the close when no other listener handles it (so Node's default exit still happens).
 */

export interface Closable {
  closeForExit(): Promise<void>;
}

const clients = new Set<Closable>();
const SIGNALS = ["SIGTERM", "SIGINT"] as const;
let installed = false;

function closeAll(): Promise<void> {
  return Promise.all([...clients].map((c) => c.closeForExit())).then(() => undefined);
}

function onBeforeExit(): void {
  if (clients.size > 0) void closeAll();
}

function onSignal(signal: NodeJS.Signals): void {
  void closeAll().finally(() => {
    uninstall();
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  });
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on("beforeExit", onBeforeExit);
  for (const s of SIGNALS) process.on(s, onSignal);
}

function uninstall(): void {
  if (!installed) return;
  installed = false;
  process.off("beforeExit", onBeforeExit);
  for (const s of SIGNALS) process.off(s, onSignal);
}

/** Close `client` at exit until it is unregistered. */
export function register(client: Closable): void {
  clients.add(client);
  install();
}

/** Stop tracking a closed client; the hooks go when the last one does. */
export function unregister(client: Closable): void {
  clients.delete(client);
  if (clients.size === 0) uninstall();
}
