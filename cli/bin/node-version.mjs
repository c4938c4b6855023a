// The Node.js versions the CLI runs on (package.json "engines"), checked before anything else loads:
// on an older one the CLI would fail later with an error that names neither Node nor the fix.

/** True for 22.15 and later 22.x, and 24 and later. */
export function supportedNode(version) {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  return (major === 22 && minor >= 15) || major >= 24;
}

export const unsupportedNodeMessage = (version) =>
  `gantry needs Node.js 22.15 or later (an LTS: 22 or 24); this is Node.js ${version.replace(/^v?/, 'v')}. Install a supported Node.js and run it again.`;
