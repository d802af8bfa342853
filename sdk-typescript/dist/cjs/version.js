"use strict";
/** The SDK's name and version, as sent in User-Agent and in every batch's `sdk` field. */
Object.defineProperty(exports, "__esModule", { value: true });
exports.USER_AGENT = exports.VERSION = exports.SDK_NAME = void 0;
exports.SDK_NAME = "headwater-node";
exports.VERSION = "0.1.0";
exports.USER_AGENT = `${exports.SDK_NAME}/${exports.VERSION} (node/${process.versions.node})`;
