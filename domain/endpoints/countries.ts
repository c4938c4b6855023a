import { iso31661 } from 'iso-3166';

/**
 * The ISO 3166-1 alpha-2 codes assigned to a country or territory (249; the `iso-3166` package's
 * list, kept to the standard's changes upstream). Reserved and user-assigned codes (`UK`, `EU`,
 * `XK`, `XX`, `ZZ`) and unassigned ones (`LO`) are not countries: no data center is in them.
 */
const ASSIGNED: ReadonlySet<string> = new Set(iso31661.map((c) => c.alpha2));

/** Whether `code` (upper case) is an assigned ISO 3166-1 alpha-2 country code. */
export const isAssignedCountry = (code: string): boolean => ASSIGNED.has(code);
