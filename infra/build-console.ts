/** `npm run console:build`: builds the console into its cache now (api/console/build.ts); `npm start` does too. */
import { ensureConsoleBuilt } from '../api/console/build.ts';
import { loadConfig } from './config.ts';

const dir = await ensureConsoleBuilt(loadConfig().cacheDir, (msg) => console.error(msg));
console.log(dir);
