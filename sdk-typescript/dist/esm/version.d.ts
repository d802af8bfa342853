/** The SDK's name and version, as sent in User-Agent and in every batch's `sdk` field. */
export declare const SDK_NAME = "headwater-node";
export declare const VERSION = "0.1.0";
export declare const USER_AGENT: string;
