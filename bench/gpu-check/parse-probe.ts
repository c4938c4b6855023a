/**
 * Gantry's own reading of a probe's output (stdin), as JSON: the GPUs with their types and pools,
 * the passthrough method and its hint. Run by bench/gpu-check/gpu_check.py where Node.js is there.
 */
import { text } from 'node:stream/consumers';
import { parseProbeOutput } from '../../activities/host-probe.ts';

process.stdout.write(JSON.stringify(parseProbeOutput(await text(process.stdin))) + '\n');
