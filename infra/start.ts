/** `npm start`: the whole platform in one process on its embedded defaults (see README). */
import closeWithGrace from 'close-with-grace';
import { loadConfig } from './config.ts';
import { startPlatform } from './platform.ts';

const config = loadConfig();
const started = Date.now();
const platform = await startPlatform(config);

const lines = [
  '',
  `Gantry is up (role ${config.role}, ${((Date.now() - started) / 1000).toFixed(1)} s)`,
  platform.apiUrl && `  REST API      ${platform.apiUrl}/v2`,
  platform.graphqlUrl && `  GraphQL       ${platform.graphqlUrl}`,
  `  Temporal      ${platform.temporalAddress}`,
  platform.temporalUiUrl && `  Temporal UI   ${platform.temporalUiUrl}`,
  `  Data          ${config.dataDir}`,
  platform.newAdminKey
    ? `  Admin API key ${platform.newAdminKey}\n                (shown once; stored hashed. Use it as "Authorization: Bearer <key>".)`
    : platform.apiUrl &&
      (config.adminApiKey ? '  Admin API key from GANTRY_ADMIN_API_KEY (not shown)' : '  Admin API key created on an earlier start (set GANTRY_ADMIN_API_KEY to choose one).'),
  '',
].filter((l): l is string => typeof l === 'string');
console.log(lines.join('\n'));

closeWithGrace({ delay: 20_000 }, async ({ signal, err }) => {
  if (err) console.error(err);
  console.error(`Stopping (${signal ?? 'error'})...`);
  await platform.stop();
});
