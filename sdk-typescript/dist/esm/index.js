/** Headwater's Node.js SDK: the public API (everything else is internal). */
export { Headwater } from "./client.js";
export { DEFAULTS, envName } from "./config.js";
export { BatchRejectedError, ConfigError, DeliveryError, EventRejectedError, EventsDroppedError, HeadwaterError, InvalidEventError, RetryableStatusError, SpoolLockedError, TransportError, UndeliveredError, } from "./errors.js";
export { MemoryTransport } from "./transport.js";
export { SDK_NAME, USER_AGENT, VERSION } from "./version.js";
export { subscribe, Subscription, SubscriptionError } from "./subscribe.js";
