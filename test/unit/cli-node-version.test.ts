/** The CLI's Node.js check (cli/bin/node-version.mjs): the engines range, said in one sentence. */
import { expect, it } from 'vitest';
import { supportedNode, unsupportedNodeMessage } from '../../cli/bin/node-version.mjs';

it('runs on 22.15+ and 24+, and names the version and the fix otherwise', () => {
  for (const v of ['22.15.0', 'v22.23.3', '24.0.0', '25.1.0']) expect(supportedNode(v), v).toBe(true);
  for (const v of ['20.20.2', 'v18.19.0', '22.14.0', '23.11.0']) expect(supportedNode(v), v).toBe(false);
  expect(unsupportedNodeMessage('v20.20.2')).toBe(
    'gantry needs Node.js 22.15 or later (an LTS: 22 or 24); this is Node.js v20.20.2. Install a supported Node.js and run it again.',
  );
});
