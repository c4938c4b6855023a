/**
 * `npm start`'s last install step, run by tooling/bootstrap.mjs in the terminal's foreground before
 * Gantry starts: finds the Temporal CLI or builds it once per machine (a few minutes), so that a
 * Ctrl+C during the build stops the build. Gantry itself runs in a process group of its own, where
 * the terminal's signals reach only Gantry (through bootstrap), not its children; a build there
 * would not hear Ctrl+C. Nothing to do with TEMPORAL_ADDRESS set. Where no CLI can be had, Gantry
 * falls back to the Temporal SDK's download at start, as before.
 */
import { loadConfig } from '../infra/config.ts';
import { resolveTemporalBinary } from '../infra/temporal.ts';

const config = loadConfig();
if (!config.temporalAddress) resolveTemporalBinary(config);
