"use strict";
/**
 * Process-wide exit hooks: on `beforeExit`, SIGTERM and SIGINT every open client is closed, each bounded by
 * its own `exitTimeoutMs`. Hooks are installed while at least one such client is open, and a signal is raised
 * again after the close when no other listener handles it (so Node's default exit still happens).
 */
Object.defineProperty(exports, "__esModule", { value: true });
exports.register = register;
exports.unregister = unregister;
const clients = new Set();
const SIGNALS = ["SIGTERM", "SIGINT"];
let installed = false;
function closeAll() {
    return Promise.all([...clients].map((c) => c.closeForExit())).then(() => undefined);
}
function onBeforeExit() {
    if (clients.size > 0)
        void closeAll();
}
function onSignal(signal) {
    void closeAll().finally(() => {
        uninstall();
        if (process.listenerCount(signal) === 0)
            process.kill(process.pid, signal);
    });
}
function install() {
    if (installed)
        return;
    installed = true;
    process.on("beforeExit", onBeforeExit);
    for (const s of SIGNALS)
        process.on(s, onSignal);
}
function uninstall() {
    if (!installed)
        return;
    installed = false;
    process.off("beforeExit", onBeforeExit);
    for (const s of SIGNALS)
        process.off(s, onSignal);
}
/** Close `client` at exit until it is unregistered. */
function register(client) {
    clients.add(client);
    install();
}
/** Stop tracking a closed client; the hooks go when the last one does. */
function unregister(client) {
    clients.delete(client);
    if (clients.size === 0)
        uninstall();
}
