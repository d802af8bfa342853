/** Headwater's Node.js SDK: the public API (everything else is internal). */

export { Headwater, type ClientState, type FlushOptions, type HeadwaterEvents, type TrackResult } from "./client.js";
export { DEFAULTS, envName, type HeadwaterOptions, type Config, type Compression, type QueuePolicy } from "./config.js";
export {
  BatchRejectedError,
  ConfigError,
  DeliveryError,
  EventRejectedError,
  EventsDroppedError,
  HeadwaterError,
  InvalidEventError,
  RetryableStatusError,
  SpoolLockedError,
  TransportError,
  UndeliveredError,
} from "./errors.js";
export type { TrackOptions } from "./event.js";
export type { Metrics } from "./metrics.js";
export type { DeliveryReport } from "./sender.js";
export { type HttpRequest, type HttpResponse, MemoryTransport, type Transport } from "./transport.js";
export { SDK_NAME, USER_AGENT, VERSION } from "./version.js";
export type { Codec } from "./compress.js";
export { subscribe, Subscription, SubscriptionError, type StreamRecord, type SubscribeOptions } from "./subscribe.js";
