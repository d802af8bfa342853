/** The SDK's name and version, as sent in User-Agent and in every batch's `sdk` field. */
export const SDK_NAME = "headwater-node";
export const VERSION = "0.1.0";
export const USER_AGENT = `${SDK_NAME}/${VERSION} (node/${process.versions.node})`;
