/** When the suite builds its once-per-machine parts before the first test (test/support/global-setup.ts). */
import { describe, expect, it } from 'vitest';
import { preparesMachine } from '../support/global-setup.ts';
import { machinePrerequisites } from '../support/machine-prerequisites.ts';

const vitest = ['node', 'vitest', 'run'];

describe('preparing the machine', () => {
  it('happens for a whole run and the scale-out run, not for chosen files, unless told', () => {
    expect(preparesMachine({}, vitest)).toBe(true);
    expect(preparesMachine({}, [...vitest, '--reporter', 'dot'].slice(0, 4))).toBe(true);
    expect(preparesMachine({}, [...vitest, 'test/unit'])).toBe(false);
    // A layer of the suite is a whole run of that layer; a file filter beside it is not.
    expect(preparesMachine({}, [...vitest, '--project', 'integration'])).toBe(true);
    expect(preparesMachine({}, [...vitest, '--reporter', 'dot', '--project', 'api'])).toBe(true);
    expect(preparesMachine({}, [...vitest, '--project', 'api', 'test/api/rate-limit.test.ts'])).toBe(false);
    expect(preparesMachine({ GANTRY_TEST_SCALE: '1' }, [...vitest, 'test/scale'])).toBe(true);
    expect(preparesMachine({ GANTRY_TEST_PREPARE: '1' }, [...vitest, 'test/unit'])).toBe(true);
    expect(preparesMachine({ GANTRY_TEST_PREPARE: '0' }, vitest)).toBe(false);
  });

  it("builds Temporal's own server only for the scale-out run", () => {
    const log = () => {};
    const whole = machinePrerequisites({ scale: false, log }).map((s) => s.what);
    const scale = machinePrerequisites({ scale: true, log }).map((s) => s.what);
    expect(whole.some((w) => w.startsWith('Python 3.13 base image'))).toBe(true);
    expect(whole.some((w) => w.includes("Temporal's own server"))).toBe(false);
    expect(scale.filter((w) => !whole.includes(w))).toEqual(["Temporal's own server and SQL tool (Go module proxy)"]);
  });
});
