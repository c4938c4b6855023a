import { describe, expect, it } from 'vitest';
import { exposureWarning } from '../../cli/src/commands/dev/server.ts';

describe('gantry dev --host', () => {
  it('says nothing on loopback addresses', () => {
    for (const host of ['localhost', 'LOCALHOST', '127.0.0.1', '127.1.2.3', '::1', '[::1]'])
      expect(exposureWarning(host)).toBeUndefined();
  });

  it('warns that the key is lent to whoever reaches any other address', () => {
    for (const host of ['0.0.0.0', '::', '192.168.1.10', 'dev.example.com', '127.0.0.1.example.com'])
      expect(exposureWarning(host)).toMatch(/API key/);
  });
});
