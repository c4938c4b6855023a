/** True for 22.15 and later 22.x, and 24 and later. */
export function supportedNode(version: string): boolean;
export function unsupportedNodeMessage(version: string): string;
