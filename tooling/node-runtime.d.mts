// Types of tooling/node-runtime.mjs (plain JavaScript: it runs before the dependencies are installed).

export declare const SUPPORTED_NODE: string;

export interface NodePackage {
  name: string;
  integrity: string;
}

export declare const PINNED_NODE: Readonly<{ version: string; packages: Readonly<Record<string, NodePackage>> }>;

export type NodeChoice =
  | { use: 'current' }
  | { use: 'fetch'; name: string; version: string; integrity: string }
  | { use: 'unsupported'; reason: string };

export declare function isSupportedNode(version: string): boolean;
export declare function chooseNode(current: { version: string; platform: string; arch: string }): NodeChoice;
export declare function nodeCacheDir(env?: Record<string, string | undefined>): string;
export declare function integrityOf(file: string): string;
export declare function npmPack(spec: string, dir: string): string;
export declare function ensureNode(
  choice: { name: string; version: string; integrity: string },
  options?: { cacheDir?: string; pack?: (spec: string, dir: string) => string; log?: (msg: string) => void },
): { node: string; binDir: string; downloaded: boolean };
