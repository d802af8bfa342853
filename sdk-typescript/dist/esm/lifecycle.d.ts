/**
 * Process-wide exit hooks: on `beforeExit`, SIGTERM and SIGINT every open client is closed, each bounded by
 * its own `exitTimeoutMs`. Hooks are installed while at least one such client is open, and a signal is raised
 * again after the close when no other listener handles it (so Node's default exit still happens).
 */
export interface Closable {
    closeForExit(): Promise<void>;
}
/** Close `client` at exit until it is unregistered. */
export declare function register(client: Closable): void;
/** Stop tracking a closed client; the hooks go when the last one does. */
export declare function unregister(client: Closable): void;
