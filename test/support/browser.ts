import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium (`npm test` installs the package when it is missing); CHROMIUM_PATH names another. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Headless Chromium for the browser tests, never downloaded: the flags keep it from calling home
 * (background networking, component updates, sync), which this machine's closed network refuses.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `no Chromium at ${CHROMIUM}: \`npm test\` installs Debian's chromium package; or set CHROMIUM_PATH`,
    );
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    chromiumSandbox: false,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/** Whether a page's request stays on this machine (the tests refuse every other). */
export const isLocal = (url: URL): boolean => url.hostname === '127.0.0.1' || url.hostname === 'localhost';
